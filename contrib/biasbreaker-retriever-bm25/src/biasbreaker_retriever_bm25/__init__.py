"""biasbreaker-retriever-bm25: a BM25 retriever for biasbreaker, shipped as a separate plugin.

Select it with ``[intervention] retriever = "bm25"``; options go under ``[plugin.bm25]``.
"""

__version__ = "0.1.0"
