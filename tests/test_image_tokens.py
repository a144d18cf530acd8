"""An image part counts what a provider bills for an image, not its base64 characters.

Before, the exact count tokenized an image part's JSON (a 200 KB screenshot as a data
URL: ~143,000 tokens) and the rough estimate counted it as nothing, so three
screenshots in a 128K window fired compaction at every turn (the parity probe of
session 28; Hermes counts ~1,500–1,600 per image). Now each image part of the
three API shapes counts ``IMAGE_TOKENS`` in both counts, whatever its size.
"""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.errors import InvalidEvent
from ctxledger.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    count_message,
    count_messages,
    count_text,
    message_text,
    rough_message_tokens,
)

#: a file or a recording, in the shapes the APIs send them
PAYLOADS = {
    "chat file": lambda data: {
        "type": "file",
        "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{data}"},
    },
    "responses file": lambda data: {
        "type": "input_file",
        "filename": "report.pdf",
        "file_data": f"data:application/pdf;base64,{data}",
    },
    "chat audio": lambda data: {
        "type": "input_audio",
        "input_audio": {"data": data, "format": "wav"},
    },
    "anthropic document": lambda data: {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": data},
    },
}


def _png(size: int, seed: int = 0) -> str:
    return base64.b64encode(random.Random(seed).randbytes(size)).decode()


def _chat_image(data: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}


SHAPES = {
    "chat": _chat_image,
    "responses": lambda data: {"type": "input_image", "image_url": f"data:image/png;base64,{data}"},
    "anthropic": lambda data: {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": data},
    },
}


def _message(image: dict[str, Any], text: str = "what is wrong on this screen?") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}, image]}


def test_each_shape_counts_its_text_and_one_image_whatever_the_image_size() -> None:
    text_only = {
        "role": "user",
        "content": [{"type": "text", "text": "what is wrong on this screen?"}],
    }
    for shape in SHAPES.values():
        small, large = _message(shape(_png(300))), _message(shape(_png(150_000, seed=1)))
        assert (
            count_message(small) == count_message(large) == count_message(text_only) + IMAGE_TOKENS
        )
        assert rough_message_tokens(small) == rough_message_tokens(text_only) + IMAGE_TOKENS
        assert rough_message_tokens(large) == rough_message_tokens(small)


def test_the_text_around_the_images_still_counts_and_other_parts_count_apart() -> None:
    image = _chat_image(_png(3_000))
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "first"},
            image,
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            image,
        ],
    }
    audio = {"role": "user", "content": [{"type": "text", "text": "first"}, message["content"][2]]}
    assert count_message(message) == count_message(audio) + 2 * IMAGE_TOKENS
    audio_json = len(json.dumps(message["content"][2], separators=(",", ":")))
    assert count_message(audio) == count_text("first") + MESSAGE_OVERHEAD + audio_json // 4
    # the text a reader reads (audit, recall) never held the image data
    assert message_text(message, text_only=True) == "first"


@given(st.lists(st.integers(0, 3), min_size=1, max_size=40), st.sampled_from(sorted(SHAPES)))
def test_a_batch_count_equals_the_counts_one_by_one(images: list[int], shape: str) -> None:
    make = SHAPES[shape]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": f"look {i}"}]
         + [make(_png(50, seed=k)) for k in range(n)]}
        for i, n in enumerate(images)
    ]  # fmt: skip
    assert count_messages(messages) == [count_message(m) for m in messages]


def test_three_screenshots_do_not_fill_a_128k_window(tmp_path: Any) -> None:
    ledger = Ledger.open(str(tmp_path / "l.db"), clock=StepClock(), ids=SequentialIds())
    sid = ledger.start_session(model="m", context_length=128_000, system_prompt="You test UIs.")
    for k in range(3):
        ledger.append_messages(
            sid,
            [
                _message(_chat_image(_png(150_000, seed=k)), f"screenshot {k}: is it right?"),
                {"role": "assistant", "content": f"screenshot {k} looks right"},
            ],
        )
    total = ledger.transcript.total_tokens(sid)
    assert 3 * IMAGE_TOKENS < total < 3 * IMAGE_TOKENS + 500
    ledger.close()


def test_a_file_or_audio_part_counts_a_quarter_of_its_json_in_both_counts() -> None:
    """Session 29: the exact count tokenized the base64 (~1 token per 1.4 characters: a
    75 KB PDF counted ~72,000 tokens) and the rough estimate counted nothing; now both
    count the part's JSON characters / 4, as hermes-agent 0.19's preflight estimate does."""
    text_only = {"role": "user", "content": [{"type": "text", "text": "summarize the attachment"}]}
    for make in PAYLOADS.values():
        part = make(_png(75_000))
        message = {"role": "user", "content": [*text_only["content"], part]}
        quarter = len(json.dumps(part, separators=(",", ":"))) // 4
        assert 25_000 < quarter < 25_100
        assert count_message(message) == count_message(text_only) + quarter
        assert rough_message_tokens(message) == rough_message_tokens(text_only) + quarter
        twice = {"role": "user", "content": [part, part]}
        assert count_messages([twice] * 40) == [count_message(twice)] * 40


def test_a_file_part_holding_text_utf8_cannot_encode_is_counted_then_refused(
    tmp_path: Any,
) -> None:
    # review of session 29: the part's JSON length raised UnicodeEncodeError (a lone
    # surrogate in a file name), a traceback from rough_message_tokens (Hermes's
    # preflight) and from append_messages instead of its InvalidEvent
    for make in PAYLOADS.values():
        part = make("QQ==")
        part = json.loads(json.dumps(part).replace("report.pdf", "r\\udcff.pdf"))
        message = {"role": "user", "content": [part]}
        assert rough_message_tokens(message) > 0 and count_message(message) > 0
    ledger = Ledger.open(str(tmp_path / "l.db"), clock=StepClock(), ids=SequentialIds())
    sid = ledger.start_session(model="m", context_length=16_000)
    before = ledger.store.last_seq()
    bad = {"role": "user", "content": [PAYLOADS["chat file"]("QQ==")]}
    bad["content"][0]["file"]["filename"] = "r\udcff.pdf"
    with pytest.raises(InvalidEvent, match=r"bytes that are not UTF-8 \(0xff\)"):
        ledger.append_messages(sid, [bad])
    assert ledger.store.last_seq() == before
    ledger.close()


def test_a_part_whose_type_is_not_text_is_counted_as_text_not_a_crash() -> None:
    # a list as a part's "type" made the image and file checks raise TypeError
    # (unhashable) in both counts; the rough one runs on messages nobody validated
    # (Hermes's preflight)
    message = {"role": "user", "content": [{"type": ["image"], "text": "hi"}]}
    assert count_message(message) > MESSAGE_OVERHEAD
    assert rough_message_tokens(message) > 0
