"""The fact extractor as it was before issue 14's fast paths: the oracle of test_facts_fastpath.py.

Verbatim copies of ctxledger/compressor/{facts,factkinds,factpaths}.py at c2756f6 (imports
renamed); do not optimise them.
"""
