"""A sibling module of backend.py, imported by its bare name as LocalAI's insightface imports
its engines.py."""
HEALTHY = b"OK"
