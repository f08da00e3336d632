"""The knowledge base: its format (schema), loader and lint."""
from .load import DATA_DIR, KBError, load_kb
from .model import KnowledgeBase

__all__ = ["DATA_DIR", "KBError", "KnowledgeBase", "load_kb"]
