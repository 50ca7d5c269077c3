"""torch_npu.asd: silent-data-corruption checks (matmul checksums)."""
