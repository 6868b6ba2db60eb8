"""`python -m forwarder status` errors, in process: the transport it tried is named in one line,
and a transport it cannot use is a usage error."""
from __future__ import annotations

import socket

import pytest

from ndnps.forwarder.__main__ import status_main
from ndnps.forwarder.status import transport_address

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


def test_unix_is_spelled_as_the_forwarder_spells_it(tmp_path, capsys):
    # the forwarder's `--unix PATH` copied onto the status command reaches that socket
    sock = tmp_path / "nobody.sock"
    assert status_main(["--unix", str(sock)]) == 1
    assert capsys.readouterr().err.startswith(
        f"forwarder status: cannot reach a forwarder at unix://{sock}: ")


def test_unix_relative_path_is_made_absolute(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert status_main(["--unix", "nfd.sock"]) == 1
    assert f"at unix://{tmp_path}/nfd.sock: " in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--unix", ""], ["--unix", "/a", "--transport", "unix:///b"]])
def test_unix_usage_errors(argv):
    with pytest.raises(SystemExit) as exit_:
        status_main(argv)
    assert exit_.value.code == 2
