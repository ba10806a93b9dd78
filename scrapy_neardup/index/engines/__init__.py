"""Storage engines under the ledger: storage only, each owning its reset, damage check and errors."""
