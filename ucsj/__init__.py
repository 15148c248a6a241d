"""ucsj: a multilingual LLM judge built on a Universal Criteria Set (UCS)."""

__version__ = "0.1.0"
