"""Sparse data: the CSR batch type, libsvm/svmlight I/O, and feature hashing."""

from algorithms.sparse.csr import CSRBatch, as_csr_batch, concat_batches

__all__ = ["CSRBatch", "as_csr_batch", "concat_batches"]
