"""Test helpers shared by the suite: ledger builders, strategies, fake servers, killers."""
