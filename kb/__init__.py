"""The knowledge base: its format (schema), loader, compiled artifact and lint."""
from .artifact import KnowledgeBase
from .load import DATA_DIR, KBError, kb_files, load_files

__all__ = ["DATA_DIR", "KBError", "KnowledgeBase", "kb_files", "load_files"]
