"""``read_request`` / ``write_request`` take a path as the README writes it: a ``str``
(issue 44: ``read_request("x.pb")`` raised ``AttributeError``)."""

from __future__ import annotations

import pytest

from mmctl.errors import InputError
from mmctl.request.view import read_request, write_request
from mmctl.wire import proto


def test_a_str_path_reads_and_writes(tmp_path):
    req = proto.engine_pb2.GenerateRequest(request_id="r")
    req.tokenized.input_ids.extend([1, 2, 3])
    where = str(tmp_path / "x.pb")
    assert write_request(req, where) > 0
    assert list(read_request(where).tokenized.input_ids) == [1, 2, 3]


def test_a_missing_str_path_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        read_request(str(tmp_path / "missing.pb"))
