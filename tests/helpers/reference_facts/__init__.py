"""The fact extractor as it was before issue 14's fast paths: the oracle of test_facts_fastpath.py.

Verbatim copies of ctxledger/compressor/{facts,factkinds,factpaths}.py at c2756f6 (imports
renamed); do not optimise them. Rules changed since, not fast paths, are imported from the
modules under test (session 28: the number patterns, the error-line prose check, the
thanks filter; session 29: the version patterns, the path anchors and plausible_path,
build tools' error lines, asset paths), so the oracle checks how facts are found, with
today's rules. Rules that add a kind of span (Windows paths) are written plainly here.
Session 30's rules (numeric pre-releases, ls -l lines, amounts, timestamps, exit codes
of at most 20 digits, and what plausible_path now rejects) are stated in ``rules.py``
their own way, after a review found mistakes in them that an imported rule could not show.
"""
