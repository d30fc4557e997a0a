"""LocalAI rerankers backend: Rerank (cross-encoder) and Embedding (sentence-transformers).

A model dir with ``modules.json`` (or ModelOptions.Type == "SentenceTransformer") loads as a
SentenceTransformer bi-encoder: Embedding returns its sentence embedding and Rerank scores by
cosine similarity. Anything else loads as a CrossEncoder, which serves Rerank only.
"""

import os

from backends.common.device import select_device_and_dtype
from backends.common.errors import InvalidArgument, require
from backends.common.model_files import check_model
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2


def is_sentence_transformer(request, path: str) -> bool:
    if request.Type == "SentenceTransformer":
        return True
    if request.Type == "CrossEncoder":
        return False
    return bool(path) and os.path.isfile(os.path.join(path, "modules.json"))


def validate_rerank(request) -> None:
    require(bool(request.query.strip()), "query is empty")
    require(len(request.documents) > 0, "documents is empty: give at least one document")
    require(request.top_n >= 0, f"top_n must be >= 0, got {request.top_n}")


def rank(scores, documents, top_n: int):
    """DocumentResults sorted by descending score, cut to top_n (0 = all)."""
    order = sorted(range(len(documents)), key=lambda i: float(scores[i]), reverse=True)
    if top_n > 0:
        order = order[:top_n]
    return [
        backend_pb2.DocumentResult(index=i, text=documents[i], relevance_score=float(scores[i]))
        for i in order
    ]


EXPECTS = "a sentence-transformers or cross-encoder model folder (config.json, model.safetensors, tokenizer files)"


class RerankersServicer(BaseServicer):
    model_expects = EXPECTS

    def load(self, request, path):
        if os.path.exists(path):  # else a hub id (online only: resolve_model_path)
            check_model(path, EXPECTS, directory=True, required=["config.json"])
        import torch

        device, dtype = select_device_and_dtype(torch, request.DType or None)
        trust = bool(request.TrustRemoteCode)
        self.is_bi_encoder = is_sentence_transformer(request, path)
        if self.is_bi_encoder:
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(path, device=device, trust_remote_code=trust, model_kwargs={"dtype": dtype})
        else:
            from sentence_transformers import CrossEncoder

            model = CrossEncoder(path, device=device, trust_remote_code=trust, model_kwargs={"dtype": dtype})
        return model

    def _count_tokens(self, model, texts) -> int:
        tok = getattr(model, "tokenizer", None)
        if tok is None:
            return 0
        try:
            return sum(len(ids) for ids in tok(list(texts))["input_ids"])
        except Exception:
            return 0

    def Rerank(self, request, context):
        validate_rerank(request)
        model = self.require_model()
        docs = list(request.documents)
        if self.is_bi_encoder:
            from sentence_transformers import util

            q = model.encode([request.query], convert_to_tensor=True, normalize_embeddings=True)
            d = model.encode(docs, convert_to_tensor=True, normalize_embeddings=True)
            scores = util.cos_sim(q, d)[0].float().cpu().tolist()
        else:
            scores = model.predict([(request.query, doc) for doc in docs], convert_to_numpy=True).tolist()
            scores = [s if not isinstance(s, list) else s[0] for s in scores]
        tokens = self._count_tokens(model, [request.query] + docs)
        return backend_pb2.RerankResult(
            usage=backend_pb2.Usage(total_tokens=tokens, prompt_tokens=tokens),
            results=rank(scores, docs, request.top_n),
        )

    def Embedding(self, request, context):
        text = request.Embeddings or request.Prompt
        require(bool(text), "Embeddings/Prompt text is empty")
        model = self.require_model()
        if not self.is_bi_encoder:
            raise InvalidArgument("loaded model is a CrossEncoder: Embedding needs a SentenceTransformer model")
        vec = model.encode([text], convert_to_numpy=True)[0].astype("float32").tolist()
        n = self._count_tokens(model, [text])
        return backend_pb2.EmbeddingResult(
            embeddings=vec, dim=len(vec), tokens=n, prompt_tokens=n,
            layout=backend_pb2.EMBEDDING_LAYOUT_FINAL,
        )


def main(argv=None):
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run(RerankersServicer, argv)


if __name__ == "__main__":
    main()
