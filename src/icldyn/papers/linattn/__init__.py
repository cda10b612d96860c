"""Ahn, Cheng, Song, Yun, Jadbabaie, Sra (2024), *Linear attention is (maybe) all you need (to understand
Transformer optimization)*, ICLR 2024, arXiv 2310.01082 — the companion paper of the official LinearTransformer
code, as a plug-in written against icldyn's plug-in API (and the ``ahn`` plug-in's public model)."""
