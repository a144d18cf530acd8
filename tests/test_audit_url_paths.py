"""A path and a URL holding it: what a summary keeps of each.

* A path fact (``/api/v1/users``) is kept by a summary that names a URL whose path it
  is (``http://localhost:8000/api/v1/users``, with a query, a fragment or a resource
  under it): the URL states that exact path. Before, the port digit in front of it
  made it "a longer path" and the fact was lost.
* Not by a URL whose path only ends with it (``http://h/v2/api/v1/users``): that is
  another route, as ``/opt/legacy/app/settings.py`` is another file than
  ``/app/settings.py``; and not by a URL whose host is its first name
  (``http://api/v1/users``).
* A URL fact is not kept by its bare path: host and port are lost.
* A URL in an original is one fact, the URL; its path is no second fact (URLs are
  masked before paths are found): the URL fact already holds it, and a second fact
  would count one piece of information twice.
"""

from __future__ import annotations

from helpers.audit_harness import assistant, audit_of, status
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor import factbounds
from ctxledger.compressor.factmatch import contains
from ctxledger.compressor.facts import extract_facts

_PATH_MENTION = "The handler behind /api/v1/users returns 500."


def test_a_path_is_kept_by_a_url_whose_path_it_is() -> None:
    for summary in (
        "Fixed http://localhost:8000/api/v1/users.",
        "Fixed GET http://localhost:8000/api/v1/users?page=2 (500 before).",
        "Fixed https://user@example.com:443/api/v1/users#top",
        "Fixed http://localhost:8000/api/v1/users/42 and the list view.",
        "Fixed <http://127.0.0.1/api/v1/users>",
    ):
        audit = audit_of(assistant(_PATH_MENTION), summary)
        assert status(audit, "/api/v1/users") == "kept", summary


def test_a_path_is_not_kept_by_a_url_naming_another_path() -> None:
    for summary in (
        "Fixed http://localhost:8000/v2/api/v1/users.",
        "Fixed http://api/v1/users.",
        "Fixed http://localhost:8000/api/v1/users-old and http://h/api/v1/users.json",
        "Fixed http://localhost:8000 /api/v1/usersx",
    ):
        audit = audit_of(assistant(_PATH_MENTION), summary)
        assert status(audit, "/api/v1/users") == "lost", summary


def test_a_url_is_not_kept_by_its_bare_path() -> None:
    audit = audit_of(
        assistant("The 500 comes from http://localhost:8000/api/v1/users today."),
        "The 500 comes from /api/v1/users.",
    )
    assert status(audit, "http://localhost:8000/api/v1/users") == "lost"


def test_a_url_is_one_fact_not_a_url_and_its_path() -> None:
    facts = extract_facts(
        [{"role": "assistant", "content": "See http://localhost:8000/api/v1/users now."}]
    )
    assert [(f.kind, f.value) for f in facts] == [("url", "http://localhost:8000/api/v1/users")]


_NAME = st.text(alphabet="abc12_-", min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_NAME, min_size=1, max_size=3).map(lambda p: "/" + "/".join(p)),
    st.sampled_from(("http", "https", "ftp", "git+ssh")),
    st.sampled_from(("localhost:8000", "example.com", "u@h:1", "")),
    st.sampled_from(("", "?x=1", "#frag", "/more", ".", ",", " and")),
)
def test_a_url_states_its_own_path(path: str, scheme: str, host: str, tail: str) -> None:
    url = f"see {scheme}://{host}{path}{tail}"
    assert contains(url, path, path=True)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_NAME, min_size=1, max_size=3).map(lambda p: "/" + "/".join(p)),
    _NAME,
    st.sampled_from(("localhost:8000", "example.com")),
)
def test_a_url_does_not_state_a_path_its_path_only_ends_with(
    path: str, prefix: str, host: str
) -> None:
    url = f"see http://{host}/{prefix}{path}"
    if url.find(path) == url.rfind(path):  # (overlapping occurrences counted too)
        assert not contains(url, path, path=True)


def test_an_authority_is_read_up_to_its_bound_by_the_per_occurrence_and_the_regex_rules() -> None:
    # the look back for "scheme://" is bounded (an occurrence in a long text without one
    # read the whole text back to its start): an authority of MAX_AUTHORITY characters is
    # one, a longer one is not, in the Python rules and in the regex that takes over
    for extra, kept in ((0, True), (1, False)):
        host = "h" * (factbounds.MAX_AUTHORITY + extra)
        text = f"see http://{host}/api/v1/users now"
        assert factbounds.contains(text, "/api/v1/users", path=True) is kept
        assert factbounds.search(text, "/api/v1/users", path=True) is kept
        # past the Python tries, the regex decides the same
        many = "x/api/v1/users " * factbounds.PLAIN_TRIES + text
        assert factbounds.contains(many, "/api/v1/users", path=True) is kept
