"""Raw conversation records: numbered, hashed, append-only rounds, read in pages; the
secret filter every capture passes through; what the person's redactions left.
"""
