"""A sibling package of backend.py, imported by its bare name as LocalAI's tinygrad imports
its tool_parsers/: it resolves only with backend.py's folder first on sys.path."""
from ranking.order import ranked  # noqa: F401
