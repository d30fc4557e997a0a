"""Continuous batching: every running request advances in the same llama_decode.

One scheduler thread owns the llama_context. A request (`Generation`) is queued by the RPC thread,
admitted between two steps when a sequence id is free (at most `n_seq_max`, LoadModel's parallel
bound), and retired between two steps when it finishes, is cancelled, or fails; retiring drops its
KV cells (llama_memory_seq_rm) and frees its sampler, so its sequence id is free for the next
step. A step is one batch: the next token of every generating request, then as much of the
admitted prompts as fits in n_batch (a long prompt is fed over several steps). Logits are asked
only for a request's last prompt token and its generated tokens; each request samples from its
own output index with its own sampler chain (seed, grammar, penalties).

Prefix reuse (LocalAI's PromptCacheAll, llama-server's cache_prompt): a request that asks for it
keeps its KV cells when it retires, with the tokens they hold, on its (now free) sequence id. A
later request asking for it is admitted on the free sequence whose kept tokens share the longest
prefix with its prompt: the cells past that prefix are dropped (llama_memory_seq_rm) and only the
rest of the prompt is decoded (at least its last token, whose logits start the generation). A
request that does not ask for it takes a sequence that keeps nothing when there is one. Counters
(prompt_tokens_evaluated, prompt_tokens_reused) tell how much of the prompts was decoded.

Text leaves a request as decoded UTF-8 only (an incremental decoder holds back a partial
sequence), and text that may still become a stop string is held back until it cannot.
"""
from __future__ import annotations

import codecs
import queue
import threading
import time
from dataclasses import dataclass, field

from .binding import Context, LlamaError, Model, Sampler

_DONE = object()


@dataclass
class Generation:
    prompt: list[int]
    max_tokens: int
    sampler: Sampler  # owned by the scheduler once submitted (it frees it at retirement)
    stops: tuple[str, ...] = ()
    cache_prompt: bool = False  # reuse a kept prefix, and keep this request's cells when it retires
    # Filled by the scheduler.
    out: "queue.Queue" = field(default_factory=queue.Queue)  # str chunks, then _DONE or an exception
    cancelled: threading.Event = field(default_factory=threading.Event)
    generated: int = 0
    reused: int = 0  # prompt tokens whose KV cells came from an earlier request
    prompt_seconds: float = 0.0
    generation_seconds: float = 0.0
    finish_reason: str = ""

    def cancel(self) -> None:
        self.cancelled.set()

    def chunks(self):
        """The text as the scheduler produces it; raises what failed the request."""
        while True:
            item = self.out.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


class _Running:
    """A request's state while it holds a sequence id."""

    def __init__(self, gen: Generation, seq: int, sampler: Sampler, reused: int = 0):
        self.gen, self.seq, self.sampler = gen, seq, sampler
        self.fed = reused  # prompt tokens already in the KV cache
        self.pos = 0
        self.fed_generated: list[int] = []  # generated tokens whose cells are in the KV cache
        self.next_token = None  # the sampled token to feed at the next step
        self.output_index = -1  # batch index of this request's logits in the last step
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.text = ""
        self.sent = 0
        self.started = time.monotonic()
        self.first_token_at = None

    def emit(self, piece: bytes, final: bool) -> bool:
        """Adds a token's bytes; sends what can no longer change. True when a stop string ended it."""
        self.text += self.decoder.decode(piece, final=final)
        stops = self.gen.stops
        for stop in stops:
            idx = self.text.find(stop, max(0, self.sent - len(stop)))
            if stop and idx != -1:
                self.text = self.text[:idx]
                self._send(len(self.text))
                return True
        hold = 0 if final else max((k for s in stops for k in range(1, len(s)) if self.text.endswith(s[:k])),
                                   default=0)
        self._send(len(self.text) - hold)
        return False

    def _send(self, upto: int) -> None:
        if upto > self.sent:
            self.gen.out.put(self.text[self.sent:upto])
            self.sent = upto


class Scheduler:
    def __init__(self, model: Model, context: Context, n_ctx_limit: int):
        self.model, self.context = model, context
        self.n_ctx_limit = n_ctx_limit
        self.free_seqs = list(range(context.n_seq_max))
        self.kept: dict[int, list[int]] = {}  # free sequence id -> the tokens its KV cells still hold
        self.prompt_tokens_evaluated = 0
        self.prompt_tokens_reused = 0
        self.waiting: "queue.Queue[Generation]" = queue.Queue()
        self.running: list[_Running] = []
        self._wake = threading.Condition()
        self._stopping = False
        self.steps = 0
        self.max_batch_sequences = 0  # the most requests one llama_decode has carried
        self._thread = threading.Thread(target=self._loop, name="llama-scheduler", daemon=True)
        self._thread.start()

    # ---- RPC side ------------------------------------------------------------------------
    def submit(self, gen: Generation) -> Generation:
        with self._wake:
            if self._stopping:
                raise LlamaError("the model is being unloaded")
            self.waiting.put(gen)
            self._wake.notify()
        return gen

    def cancel(self, gen: Generation) -> None:
        gen.cancel()
        with self._wake:
            self._wake.notify()

    def close(self) -> None:
        """Stops the thread (after its current step); requests still queued or running fail."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join()

    # ---- scheduler thread ----------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._stopping and not self.running and self.waiting.empty():
                    self._wake.wait()
                if self._stopping:
                    break
            self._retire_cancelled()
            self._admit()
            if self.running:
                try:
                    self._step()
                except Exception as e:  # noqa: BLE001 - a failed decode fails its requests, not the server
                    for r in list(self.running):
                        self._retire(r, e)
        for r in list(self.running):
            self._retire(r, LlamaError("the model was unloaded during generation"))
        while not self.waiting.empty():
            gen = self.waiting.get()
            gen.sampler.close()
            gen.out.put(LlamaError("the model was unloaded before generation started"))

    def _retire_cancelled(self) -> None:
        for r in list(self.running):
            if r.gen.cancelled.is_set():
                r.gen.finish_reason = "cancelled"
                self._retire(r, None)

    def _admit(self) -> None:
        while self.free_seqs and not self.waiting.empty():
            gen = self.waiting.get()
            if gen.cancelled.is_set():
                gen.sampler.close()
                gen.out.put(_DONE)
                continue
            seq, reused = self._sequence_for(gen)
            gen.reused = reused
            self.prompt_tokens_reused += reused
            self.running.append(_Running(gen, seq, gen.sampler, reused))

    def _sequence_for(self, gen: Generation) -> tuple[int, int]:
        """A free sequence id for `gen` and how many of its prompt tokens are already in its cells."""
        def shared(seq: int) -> int:
            kept, n = self.kept.get(seq, ()), 0
            for a, b in zip(kept, gen.prompt):
                if a != b:
                    break
                n += 1
            return min(n, len(gen.prompt) - 1)  # the last prompt token is decoded: its logits are needed

        if gen.cache_prompt:
            seq = max(self.free_seqs, key=lambda s: (shared(s), -s))
        else:  # keep other requests' prefixes alive: a sequence that keeps nothing, else the lowest id
            seq = min(self.free_seqs, key=lambda s: (s in self.kept, s))
        reused = shared(seq) if gen.cache_prompt else 0
        self.free_seqs.remove(seq)
        self.kept.pop(seq, None)
        self.context.forget(seq, reused)
        return seq, reused

    def _retire(self, r: _Running, error) -> None:
        self.running.remove(r)
        if r.gen.cache_prompt and error is None:
            self.kept[r.seq] = r.gen.prompt[:r.fed] + r.fed_generated
        else:
            self.context.forget(r.seq)
        r.sampler.close()
        self.free_seqs.append(r.seq)
        self.free_seqs.sort()
        now = time.monotonic()
        if r.first_token_at is not None:
            r.gen.prompt_seconds = r.first_token_at - r.started
            r.gen.generation_seconds = now - r.first_token_at
        r.gen.out.put(error if error is not None else _DONE)

    def _step(self) -> None:
        entries = []
        for r in self.running:  # generating requests first: one token each
            r.output_index = -1
            if r.next_token is not None:
                r.output_index = len(entries)
                entries.append((r.next_token, r.pos, r.seq, True))
        room = self.context.n_batch - len(entries)
        for r in self.running:  # then prompt chunks, as many as fit
            if r.next_token is None and room > 0:
                take = min(room, len(r.gen.prompt) - r.fed)
                for i in range(take):
                    last = r.fed + i == len(r.gen.prompt) - 1
                    if last:
                        r.output_index = len(entries)
                    entries.append((r.gen.prompt[r.fed + i], r.fed + i, r.seq, last))
                r.fed += take
                room -= take
                self.prompt_tokens_evaluated += take
        if not entries:
            return
        self.context.decode(entries)
        self.steps += 1
        self.max_batch_sequences = max(self.max_batch_sequences, len({e[2] for e in entries}))
        for r in list(self.running):
            if r.output_index < 0:
                continue
            if r.next_token is not None:
                r.pos += 1
                r.fed_generated.append(r.next_token)
            else:
                r.pos = len(r.gen.prompt)
            token = r.sampler.sample(self.context, r.output_index)
            if r.first_token_at is None:
                r.first_token_at = time.monotonic()
            # IgnoreEOS is the sampler's (binding.Sampler: its EOG tokens are masked at the head of
            # the chain): it yields an EOG token only when nothing else is possible (a grammar at its
            # end), which ends the generation like any end of generation.
            if self.model.is_eog(token):
                r.emit(b"", final=True)
                r.gen.finish_reason = "stop"
                self._retire(r, None)
                continue
            r.gen.generated += 1
            full = r.gen.generated >= r.gen.max_tokens or r.pos >= self.n_ctx_limit
            stopped = r.emit(self.model.piece(token), final=full)
            if stopped or full:
                r.gen.finish_reason = "stop" if stopped else "length"
                self._retire(r, None)
            else:
                r.next_token = token
