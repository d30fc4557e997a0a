"""backends/llama-cpp:cpu (llama.cpp from engines/llama-cpp), packaged by Pants, started as LocalAI
starts it, called over gRPC, with a tiny random Llama made here with transformers' LlamaConfig and
converted by the pinned archive's convert_hf_to_gguf.py (tests/integration/llama_cpp_models.py).
The same weights in transformers are the reference (f32 GGUF, f32 KV cache).
"""
from __future__ import annotations

import re
import tarfile
import threading
import time
from pathlib import Path

import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, packaged_cpu_levels, packaged_levels, pex_distributions, pex_files, pex_path
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.llama_cpp_models import CORPUS, SDIST, convert, make_model
from tests.integration.rpc_checks import Code, assert_healthy, expect_code

BACKEND = "llama-cpp"
LEVELS = packaged_cpu_levels()
LIB = "libllama.so"
CONTEXT = 256
PARALLEL = 4
PROMPT = "the quick brown fox"
# Embeddings: llama.cpp's mean pooling of the final-norm hidden states against transformers' on the
# same f32 weights; measured max abs difference 2.9e-6 (flash attention off): bounded at 1e-4.
EMBEDDING_TOLERANCE = 1e-4
# LocalAI admits at most PYTHON_GRPC_MAX_WORKERS calls at once; more than PARALLEL so that
# requests also queue for a free sequence.
SERVER_ENV = {"PYTHON_GRPC_MAX_WORKERS": "8"}


@pytest.fixture(scope="module")
def pex() -> Path:
    return pex_path(BACKEND, "cpu")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-llama")
    model, tokenizer = make_model(root / "hf")
    gguf = convert(root / "hf", root / "tiny-llama-f32.gguf")
    return model, tokenizer, gguf


def load_options(gguf: Path, **kw) -> backend_pb2.ModelOptions:
    # FlashAttention off: ggml's CPU flash attention rounds through f16 (measured on the embedding:
    # 1.7e-3 max abs difference to transformers with it on "auto", 2.9e-6 with it off).
    base = dict(Model=str(gguf), ContextSize=CONTEXT, Threads=2, Embeddings=True, CacheTypeKey="f32",
                CacheTypeValue="f32", FlashAttention="off", Options=[f"parallel:{PARALLEL}"])
    return backend_pb2.ModelOptions(**{**base, **kw})


@pytest.fixture(scope="module")
def server(tiny):
    with BackendProcess(BACKEND, env=SERVER_ENV) as proc:
        res = proc.stub.LoadModel(load_options(tiny[2]), timeout=300)
        assert res.success, res.message
        yield proc


def predict(stub, prompt=PROMPT, **kw) -> str:
    kw.setdefault("Tokens", 64)
    return stub.Predict(backend_pb2.PredictOptions(Prompt=prompt, **kw), timeout=300).message.decode("utf-8")


def stream(stub, prompt=PROMPT, **kw) -> list[bytes]:
    kw.setdefault("Tokens", 64)
    return [r.message for r in stub.PredictStream(backend_pb2.PredictOptions(Prompt=prompt, **kw), timeout=300)]


def pieces_text(tokenizer, ids) -> str:
    """What llama.cpp's SPM vocabulary renders for `ids` (token_to_piece, specials hidden), rebuilt
    from the HF tokenizer: '▁' is a space, <0xNN> is that byte."""
    out = b""
    for piece in tokenizer.convert_ids_to_tokens(ids):
        if piece in tokenizer.all_special_tokens:
            continue
        m = re.fullmatch(r"<0x([0-9A-F]{2})>", piece)
        out += bytes([int(m.group(1), 16)]) if m else piece.replace("▁", " ").encode("utf-8")
    return out.decode("utf-8", "replace")


def header_api() -> set[str]:
    """The functions llama.h declares (LLAMA_API ... name(...)), from the pinned sdist."""
    with tarfile.open(SDIST) as tf:
        m = next(m for m in tf.getmembers() if m.name.endswith("vendor/llama.cpp/include/llama.h"))
        text = tf.extractfile(m).read().decode()
    text = re.sub(r"//[^\n]*|^\s*#.*$", "", text, flags=re.M).replace("DEPRECATED(", "")  # no macros, no comments
    return set(re.findall(r"\bLLAMA_API\s[^;(]*?\b(\w+)\s*\(", text))


def test_pex_carries_every_cpu_level_and_no_torch_or_numpy(pex) -> None:
    names = pex_files(pex)
    assert packaged_levels(names, "llama-cpp", LIB) == set(LEVELS)
    banned = [d for d in pex_distributions(pex) if d.lower().startswith(("torch", "numpy", "transformers", "nvidia",
                                                                         "llama_cpp"))]
    assert not banned, banned


def test_library_exports_exactly_the_c_api_of_the_header(pex) -> None:
    from elftools.elf.elffile import ELFFile

    api = header_api()
    assert {"llama_decode", "llama_model_load_from_file", "llama_sampler_init_grammar", "llama_tokenize"} <= api
    for level in LEVELS:
        lib = pex / "localai_backend/engines/llama-cpp" / level / LIB  # loose in the packed PEX
        with lib.open("rb") as f:
            elf = ELFFile(f)
            dynsym = elf.get_section_by_name(".dynsym")
            exported = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF" and s.name}
            needed = {t.needed for t in elf.get_section_by_name(".dynamic").iter_tags() if t.entry.d_tag == "DT_NEEDED"}
        assert exported == api, (level, sorted(exported - api)[:20], sorted(api - exported)[:20])
        assert not any("ggml" in n for n in needed), needed  # ggml is linked in statically


def test_tokenizer_matches_transformers(server, tiny) -> None:
    _, tokenizer, _ = tiny
    # llama.cpp reads the converted vocabulary as SentencePiece (merges by score) where transformers
    # applies BPE merges by rank: the same for these strings, not for every string (measured:
    # "numbers 100 and 1000" differs from its 5th token). Every string round-trips.
    for text in (PROMPT, "héllo wörld 日本語 🙂", "numbers 100 and 1000"):
        got = list(server.stub.TokenizeString(backend_pb2.PredictOptions(Prompt=text), timeout=60).tokens)
        if not text.startswith("numbers"):
            assert got == tokenizer(text, add_special_tokens=False).input_ids, text
        back = server.stub.Detokenize(backend_pb2.DetokenizeRequest(tokens=got), timeout=60).content
        assert back.strip() == text


def transformers_greedy(model, prompt_ids: list[int], n: int, suppress=()) -> list[int]:
    """n greedy tokens; `suppress`: token ids never picked (logit -inf, what transformers' min_new_tokens
    does to EOS, i.e. LocalAI's IgnoreEOS in transformers:cpu)."""
    import torch

    ids = torch.tensor([prompt_ids])
    out = []
    with torch.no_grad():
        for _ in range(n):
            logits = model(ids).logits[0, -1]
            logits[list(suppress)] = float("-inf")
            token = int(torch.argmax(logits))
            out.append(token)
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    return out


def llama_prompt_ids(stub, tokenizer, prompt: str) -> list[int]:
    """The prompt as llama.cpp tokenizes it (BOS + TokenizeString): the model's computation is compared."""
    return [tokenizer.bos_token_id, *stub.TokenizeString(backend_pb2.PredictOptions(Prompt=prompt), timeout=60).tokens]


def test_greedy_64_tokens_equal_transformers(server, tiny) -> None:
    model, tokenizer, _ = tiny
    prompt_ids = llama_prompt_ids(server.stub, tokenizer, PROMPT)
    expected_ids = transformers_greedy(model, prompt_ids, 64, suppress=[tokenizer.eos_token_id])
    assert len(set(expected_ids)) > 3, "the random model repeats one token: the comparison would prove little"
    got = predict(server.stub, Tokens=64, Temperature=0, IgnoreEOS=True)
    assert got == pieces_text(tokenizer, expected_ids)


def eos_candidates() -> list[str]:
    """Prompts in a fixed order: the corpus' words, then pairs of them."""
    words = sorted({w for line in CORPUS for w in line.split()})
    return words + [f"{a} {b}" for a in words for b in words]


def first_prompt_ending_in_eos(stub, model, tokenizer, n: int):
    """(prompt, its llama.cpp ids, transformers' greedy n tokens) of the first candidate whose greedy
    continuation picks </s> after some text."""
    candidates = eos_candidates()
    for prompt in candidates:
        ids = llama_prompt_ids(stub, tokenizer, prompt)
        plain = transformers_greedy(model, ids, n)
        if tokenizer.eos_token_id in plain[1:]:
            return prompt, ids, plain
    pytest.fail(f"none of {len(candidates)} prompts makes the tiny model pick </s> greedily in {n} tokens: "
                "the IgnoreEOS check needs one (add candidates to eos_candidates)")


def test_ignore_eos_masks_end_of_generation_as_transformers_does(server, tiny) -> None:
    """IgnoreEOS is llama.cpp's ignore_eos (every end-of-generation token masked in the sampler) and
    transformers' min_new_tokens (EOS at -inf): tested on a prompt whose greedy continuation picks
    </s>, where a backend that only keeps going after </s> (and feeds it back) answers otherwise."""
    model, tokenizer, _ = tiny
    eos, n = tokenizer.eos_token_id, 32
    prompt, ids, plain = first_prompt_ending_in_eos(server.stub, model, tokenizer, n)
    k = plain.index(eos)
    suppressed = transformers_greedy(model, ids, n, suppress=[eos])
    assert suppressed[:k] == plain[:k] and eos not in suppressed
    # Without IgnoreEOS generation ends at </s>, after k tokens, as transformers' greedy does.
    reply = server.stub.Predict(backend_pb2.PredictOptions(Prompt=prompt, Tokens=n, Temperature=0), timeout=300)
    assert (reply.tokens, reply.message.decode("utf-8")) == (k, pieces_text(tokenizer, plain[:k])), prompt
    # With IgnoreEOS: exactly Tokens tokens, </s> never picked nor fed back (what follows equals
    # transformers' with EOS suppressed), in Predict and in the stream.
    ignore = dict(Prompt=prompt, Tokens=n, Temperature=0, IgnoreEOS=True)
    reply = server.stub.Predict(backend_pb2.PredictOptions(**ignore), timeout=300)
    expected = pieces_text(tokenizer, suppressed)
    assert (reply.tokens, reply.message.decode("utf-8")) == (n, expected), (prompt, k)
    replies = list(server.stub.PredictStream(backend_pb2.PredictOptions(**ignore), timeout=300))
    assert b"".join(r.message for r in replies).decode("utf-8") == expected and replies[-1].tokens == n
    # A grammar's end is still an end: with IgnoreEOS the generation stops where the grammar allows
    # nothing but an end of generation (with every logit at -inf llama.cpp's grammar would abort the
    # process), the server keeps serving.
    for temperature in (0, 0.8):
        got = predict(server.stub, prompt, Tokens=n, Temperature=temperature, Seed=3, IgnoreEOS=True,
                      Grammar='root ::= "hello world"')
        assert got == "hello world"
    assert_healthy(server.stub)


def test_embeddings_match_transformers(server, tiny) -> None:
    import torch

    model, tokenizer, _ = tiny
    text = "once upon a time there was a tiny random network"
    res = server.stub.Embedding(backend_pb2.PredictOptions(Embeddings=text), timeout=60)
    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        hidden = model(ids, output_hidden_states=True).hidden_states[-1][0]
    expected = hidden.mean(dim=0).tolist()
    assert res.dim == len(expected) == model.config.hidden_size and res.tokens == ids.shape[1]
    diff = max(abs(a - b) for a, b in zip(res.embeddings, expected))
    assert diff < EMBEDDING_TOLERANCE, diff


def test_same_seed_same_sampled_text(server) -> None:
    kw = dict(Tokens=32, Temperature=1.0, TopK=40, TopP=0.95, MinP=0.02, Penalty=1.1, Repeat=16)
    a = predict(server.stub, Seed=1234, **kw)
    assert predict(server.stub, Seed=1234, **kw) == a
    others = {predict(server.stub, Seed=s, **kw) for s in (1, 2, 3)}
    assert others - {a}, "three other seeds all gave the seed-1234 text: sampling ignores the seed"


def test_stream_sends_only_whole_utf8_and_follows_the_grammar(server) -> None:
    target = "héllo wörld 日本語 🙂"
    grammar = 'root ::= "' + target + '"'
    chunks = stream(server.stub, Tokens=40, Temperature=0.8, Seed=5, Grammar=grammar)
    for c in chunks:
        c.decode("utf-8")  # strict: a split multi-byte sequence would raise
    assert b"".join(chunks).decode("utf-8") == target
    assert len([c for c in chunks if c]) > 1, "the text came in one chunk: not streamed"


def test_stop_prompts_cut_the_text(server) -> None:
    full = predict(server.stub, Tokens=48, Temperature=0, IgnoreEOS=True)
    stop = full[len(full) // 2:len(full) // 2 + 3]
    assert stop.strip(), full
    got = predict(server.stub, Tokens=48, Temperature=0, IgnoreEOS=True, StopPrompts=[stop])
    assert got == full[:full.index(stop)]
    streamed = b"".join(stream(server.stub, Tokens=48, Temperature=0, IgnoreEOS=True, StopPrompts=[stop]))
    assert streamed.decode() == got


def breakdown(stub) -> dict:
    return dict(stub.Status(backend_pb2.HealthMessage(), timeout=10).memory.breakdown)


def test_prompt_cache_reuses_kept_prefix_cells_with_the_same_output(server) -> None:
    stub = server.stub
    prompt = "once upon a time there was a tiny random network"
    longer = prompt + " and the lazy dog"
    kw = dict(Tokens=32, Temperature=0, IgnoreEOS=True)

    def run(text, cache):
        """(reply, prompt tokens decoded, prompt tokens reused) of one Predict."""
        before = breakdown(stub)
        reply = stub.Predict(backend_pb2.PredictOptions(Prompt=text, PromptCacheAll=cache, **kw), timeout=300)
        after = breakdown(stub)
        return (reply, after["prompt_tokens_evaluated"] - before["prompt_tokens_evaluated"],
                after["prompt_tokens_reused"] - before["prompt_tokens_reused"])

    plain, evaluated, reused = run(prompt, cache=False)
    n = plain.prompt_tokens
    assert (evaluated, reused) == (n, 0)
    first, evaluated, reused = run(prompt, cache=True)  # nothing kept yet: decodes the prompt, keeps its cells
    assert (evaluated, reused) == (n, 0)
    second, evaluated, reused = run(prompt, cache=True)  # every cell but the last token's, which gives the logits
    assert (evaluated, reused) == (1, n - 1)
    assert plain.message == first.message == second.message
    # A prompt that extends it reuses the shared prefix of the two tokenizations (BOS included).
    ids = [list(stub.TokenizeString(backend_pb2.PredictOptions(Prompt=t), timeout=60).tokens) for t in (prompt, longer)]
    shared = next((i for i, (a, b) in enumerate(zip(*ids)) if a != b), len(ids[0])) + 1
    long_plain, _, _ = run(longer, cache=False)
    long_cached, evaluated, reused = run(longer, cache=True)
    assert reused == shared and evaluated == long_plain.prompt_tokens - shared > 0
    assert long_cached.message == long_plain.message


def test_concurrent_streams_each_equal_what_it_gives_alone(server) -> None:
    requests = [dict(prompt=p, Tokens=48, Temperature=0, IgnoreEOS=True)
                for p in (PROMPT, "a small model", "llama cpp decodes", "numbers 1 2 3")]
    requests += [dict(prompt="once upon a time", Tokens=40, Temperature=0.9, TopK=20, Seed=s) for s in (7, 8)]
    requests += [dict(prompt="the lazy dog " * 12, Tokens=24, Temperature=0)]  # a longer prompt joins mid-way
    alone = [b"".join(stream(server.stub, **r)) for r in requests]
    results: list = [None] * len(requests)
    errors = []

    def run(i):
        try:
            results[i] = b"".join(stream(server.stub, **requests[i]))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    for i, (a, b) in enumerate(zip(alone, results)):
        assert a == b, (i, requests[i], a, b)
    # The requests really shared llama_decode calls, at most PARALLEL sequences in one.
    shared = breakdown(server.stub)
    assert 2 <= shared["max_batch_sequences"] <= PARALLEL, shared


def test_cancelled_streams_free_their_sequences(server) -> None:
    calls = [server.stub.PredictStream(backend_pb2.PredictOptions(Prompt=PROMPT, Tokens=200, Temperature=0,
                                                                  IgnoreEOS=True), timeout=300)
             for _ in range(PARALLEL)]
    for c in calls:
        next(c)
    assert breakdown(server.stub)["running_sequences"] >= 1
    for c in calls:
        c.cancel()
    deadline = time.monotonic() + 30
    while breakdown(server.stub)["running_sequences"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert breakdown(server.stub)["running_sequences"] == 0
    assert predict(server.stub, Tokens=8, Temperature=0)  # every sequence is usable again


def test_bad_requests_name_the_limit_and_the_server_stays_up(server) -> None:
    stub = server.stub
    n = len(stub.TokenizeString(backend_pb2.PredictOptions(Prompt=PROMPT), timeout=60).tokens) + 1  # + BOS
    err = expect_code(Code.INVALID_ARGUMENT, stub.Predict, backend_pb2.PredictOptions(Prompt=PROMPT, Tokens=CONTEXT))
    assert f"{CONTEXT}" in err.details() and f"at most {CONTEXT - n}" in err.details(), err.details()
    err = expect_code(Code.INVALID_ARGUMENT, stub.PredictStream,
                      backend_pb2.PredictOptions(Prompt="the lazy dog " * 200, Tokens=4))
    assert f"context (ContextSize) is {CONTEXT} tokens" in err.details(), err.details()
    err = expect_code(Code.INVALID_ARGUMENT, stub.Predict,
                      backend_pb2.PredictOptions(Prompt=PROMPT, Tokens=4, Grammar='root ::= "unterminated'))
    assert "Grammar" in err.details(), err.details()
    for bad in (dict(TopP=1.5), dict(Temperature=-1), dict(MinP=2), dict(TopK=-3), dict(Mirostat=2)):
        err = expect_code(Code.INVALID_ARGUMENT, stub.Predict, backend_pb2.PredictOptions(Prompt=PROMPT, **bad))
        assert next(iter(bad)) in err.details(), err.details()
    err = expect_code(Code.INVALID_ARGUMENT, stub.Detokenize, backend_pb2.DetokenizeRequest(tokens=[1, 10 ** 6]))
    assert "vocabulary" in err.details()
    expect_code(Code.INVALID_ARGUMENT, stub.Embedding, backend_pb2.PredictOptions(Embeddings="the lazy dog " * 200))
    assert_healthy(stub)
    assert predict(stub, Tokens=4, Temperature=0)


def test_bad_models_and_options_and_free_during_generation(tiny, tmp_path) -> None:
    gguf = tiny[2]
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(bytes(range(256)) * 64)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(gguf.read_bytes()[: gguf.stat().st_size // 2])
    header_only = tmp_path / "header.gguf"
    header_only.write_bytes(gguf.read_bytes()[:24])
    with BackendProcess(BACKEND, env=SERVER_ENV) as proc:
        stub = proc.stub
        expect_code(Code.NOT_FOUND, stub.LoadModel, load_options(tmp_path / "missing.gguf"))
        for path, says in ((garbage, "not a GGUF file"), (truncated, "cannot load"), (header_only, "cannot load")):
            err = expect_code(Code.INVALID_ARGUMENT, stub.LoadModel, load_options(path))
            assert says in err.details() and path.name in err.details(), err.details()
            assert_healthy(stub)
        for bad, says in ((dict(FlashAttention="sometimes"), "FlashAttention"), (dict(CacheTypeKey="f13"), "CacheTypeKey"),
                          (dict(Options=["parallel:0"]), "parallel"), (dict(Options=["parallel:x"]), "parallel"),
                          (dict(ContextSize=-5), "ContextSize")):
            err = expect_code(Code.INVALID_ARGUMENT, stub.LoadModel, load_options(gguf, **bad))
            assert says in err.details(), err.details()
        assert_bad_models_answer_clearly(stub, tmp_path / "bad", file_name="model.gguf", takes_folders=False)
        expect_code(Code.FAILED_PRECONDITION, stub.Predict, backend_pb2.PredictOptions(Prompt=PROMPT))
        assert stub.LoadModel(load_options(gguf), timeout=300).success
        # Free while streams run: it waits for them (new calls meanwhile ABORTED), nothing crashes.
        calls = [stub.PredictStream(backend_pb2.PredictOptions(Prompt=PROMPT, Tokens=120, Temperature=0,
                                                               IgnoreEOS=True), timeout=300) for _ in range(2)]
        firsts = [next(c) for c in calls]
        freed = stub.Free.future(backend_pb2.HealthMessage(), timeout=300)
        texts = [f.message + b"".join(r.message for r in c) for f, c in zip(firsts, calls)]
        assert freed.result().success
        assert texts[0] == texts[1] and len(texts[0]) > 20
        expect_code(Code.FAILED_PRECONDITION, stub.Predict, backend_pb2.PredictOptions(Prompt=PROMPT))
        # LoadModel while a stream runs, then the new model serves.
        assert stub.LoadModel(load_options(gguf), timeout=300).success
        call = stub.PredictStream(backend_pb2.PredictOptions(Prompt=PROMPT, Tokens=120, Temperature=0, IgnoreEOS=True),
                                  timeout=300)
        next(call)
        reload = stub.LoadModel.future(load_options(gguf, Options=["parallel:2"]), timeout=300)
        list(call)
        assert reload.result().success
        assert breakdown(stub)["parallel"] == 2
        assert predict(stub, Tokens=8, Temperature=0)
        assert proc.proc.poll() is None
