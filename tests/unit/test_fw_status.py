"""`python -m forwarder status` errors, in process: the transport it tried is named in one line,
and a transport it cannot use is a usage error."""
from __future__ import annotations

import socket

import pytest

from forwarder.__main__ import status_main
from forwarder.status import transport_address

pytestmark = pytest.mark.timeout(30)


def test_no_forwarder_is_one_line_naming_the_socket(tmp_path, capsys):
    uri = f"unix://{tmp_path}/nobody.sock"
    assert status_main(["--transport", uri]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"forwarder status: cannot reach a forwarder at {uri}: " \
                  "No such file or directory\n"


@pytest.mark.parametrize("uri", ["http://h:1", "unix://", "tcp://h:0", "tcp://h:99999",
                                 "tcp://h:port", "/run/nfd/nfd.sock"])
def test_unusable_transport_is_a_usage_error(uri, capsys):
    with pytest.raises(SystemExit) as exit_:
        status_main(["--transport", uri])
    assert exit_.value.code == 2
    assert f"unsupported transport {uri!r}" in capsys.readouterr().err


def test_transport_address():
    assert transport_address("unix:///run/nfd/nfd.sock") == (socket.AF_UNIX, "/run/nfd/nfd.sock")
    assert transport_address("tcp://10.0.0.1:6364") == (socket.AF_INET, ("10.0.0.1", 6364))
    assert transport_address("tcp4://h") == (socket.AF_INET, ("h", 6363))
