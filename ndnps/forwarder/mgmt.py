"""The NFD management subset that python-ndn, NDNts and nfdc-style tools use.

Control commands (`/localhost/nfd/<module>/<verb>/<ControlParameters>/...`) are accepted in both
signed-Interest forms: the v0.3 signed Interest (python-ndn appv2, NDNts) and the legacy
9-component command Interest (python-ndn's `ndn.app`). The parameters are always the fifth
component. Every ControlResponse carries ControlParameters, errors included: python-ndn's
`register()` raises on a response without them.

Management is the app of the internal face (INTERNAL_FACE, `/localhost/nfd` routed to it):
`ManagementApp` takes each Interest the forwarder sends there and hands it to a submit function
(the daemon runs `Management.handle` as a task; its answer is received from the internal face).
It is not on the forwarding hot path, so it uses python-ndn's TLV models.
"""
from __future__ import annotations

import json
import struct
import time
from dataclasses import asdict
from typing import Awaitable, Callable

from ndn.app_support import nfd_mgmt as m
from ndn.encoding import Component, MetaInfo, make_data
from ndn.security import DigestSha256Signer

from ndnps.ndn.packet import Data, Interest, Nack
from .face_table import INTERNAL_FACE
from .internal_face import InternalApp
from .pipelines import Forwarder
from .strategy import UnknownStrategy, strategy_by_name
from .tables.rib import CHILD_INHERIT, Route
from ndnps.ndn.aggregation import AggregatorConfig
from ndnps.ndn.conventions import segment
from ndnps.ndn.tlv import DecodeError, component_offsets, encode_tlv, name_to_str, read_tl

MGMT_PREFIX = b"\x08\x09localhost\x08\x03nfd"
DATASET_FRESHNESS_MS = 1000

# faces/create: the daemon opens the face; returns its FaceId or raises ValueError
FaceCreator = Callable[[str, int], Awaitable[tuple[int, bool]]]
FaceDestroyer = Callable[[int], bool]
ReliabilitySetter = Callable[[int, bool], bool]    # faces/update: (face id, on) -> face found
LP_RELIABILITY: int = m.FaceFlags.LP_RELIABILITY_ENABLED.value


class ManagementApp(InternalApp):
    """Management at the app's end of the internal face: every Interest for it, with the face
    it came from (the default FaceId of rib/register), goes to `submit`; the answer, made
    later, goes back through Forwarder.on_receive(INTERNAL_FACE, ...)."""

    def __init__(self, submit: Callable[[Interest, int], None]) -> None:
        self.submit = submit

    def on_interest(self, interest: Interest, in_face: int,
                    now: float) -> list[Interest | Data | Nack]:
        self.submit(interest, in_face)
        return []


def install(fw: Forwarder, submit: Callable[[Interest, int], None]) -> None:
    """Management on the internal face: `/localhost/nfd` routed to it (as NFD's), each
    Interest for it handed to `submit`."""
    fw.add_internal_face(ManagementApp(submit), INTERNAL_FACE)
    fw.rib.add(MGMT_PREFIX, 2, Route(INTERNAL_FACE, 0, 0, CHILD_INHERIT, None))


class ControlError(Exception):
    def __init__(self, code: int, text: str, params: m.ControlParametersValue | None = None):
        super().__init__(text)
        self.code = code
        self.text = text
        self.params = params


def _response(code: int, text: str, params: m.ControlParametersValue | None) -> bytes:
    cr = m.ControlResponse()
    cr.status_code = code
    cr.status_text = text
    cr.body = params if params is not None else m.ControlParametersValue()
    body = cr.encode()
    # ControlResponse is TLV-TYPE 0x65 around these fields
    return encode_tlv(0x65, bytes(body))


def _components(name: bytes) -> list[bytes]:
    offs = component_offsets(name)
    return [name[a:b] for a, b in zip([0] + offs[:-1], offs)]


class Management:
    def __init__(self, fw: Forwarder, create_face: FaceCreator | None = None,
                 destroy_face: FaceDestroyer | None = None,
                 set_reliability: ReliabilitySetter | None = None) -> None:
        self.fw = fw
        self.create_face = create_face
        self.destroy_face = destroy_face
        self.set_reliability = set_reliability
        self.start_time = time.time()
        self._signer = DigestSha256Signer()
        self._datasets: dict[bytes, list[bytes]] = {}    # versioned prefix -> segments
        self._commands = {
            (b"rib", b"register"): self._rib_register,
            (b"rib", b"unregister"): self._rib_unregister,
            (b"faces", b"create"): self._faces_create,
            (b"faces", b"destroy"): self._faces_destroy,
            (b"faces", b"update"): self._faces_update,
            (b"strategy-choice", b"set"): self._strategy_set,
            (b"strategy-choice", b"unset"): self._strategy_unset,
        }
        self._lists = {
            (b"faces", b"list"): self._faces_list,
            (b"fib", b"list"): self._fib_list,
            (b"rib", b"list"): self._rib_list,
            (b"status", b"general"): self._status_general,
            (b"strategy-choice", b"list"): self._strategy_list,
            (b"ppit", b"list"): self._ppit_list,
            (b"ndnps", b"status"): self._ndnps_status,
        }

    async def handle(self, interest: Interest, in_face: int) -> bytes | None:
        """Answer one management Interest with a Data wire (None: nothing to answer)."""
        try:
            comps = _components(interest.name)
        except DecodeError:
            return None
        if len(comps) < 4:
            return None
        module, verb = Component.get_value(comps[2]).tobytes(), Component.get_value(comps[3]).tobytes()
        if (module, verb) in self._lists:
            return self._dataset(interest, comps, (module, verb))
        if module == b"aggregators":
            return self._aggregators(comps, verb)
        handler = self._commands.get((module, verb))
        if handler is None:
            return self._reply(comps, 501, "Unsupported command", None)
        try:
            if len(comps) < 5:
                raise ControlError(400, "Missing ControlParameters")
            params = self._parse_params(comps[4])
            code, text, out = 200, "OK", await handler(params, in_face)
        except ControlError as e:
            code, text, out = e.code, e.text, e.params
        return self._reply(comps, code, text, out)

    # ---- commands ------------------------------------------------------------------------

    def _aggregators(self, comps: list[bytes], verb: bytes) -> bytes:
        """`aggregators/add` (the fifth component: ndnps.ndn.aggregation.AggregatorConfig)
        makes this forwarder aggregate for the training; `aggregators/remove` (the fifth
        component: the training's Name) stops it. Local faces only, as every /localhost
        name. Not NFD's: ndnps's own module, answered with a ControlResponse all the same."""
        if verb not in (b"add", b"remove") or len(comps) < 5:
            return self._reply(comps, 501 if verb not in (b"add", b"remove") else 400,
                               "Unsupported command" if verb not in (b"add", b"remove")
                               else "Missing parameters", None)
        value = bytes(Component.get_value(comps[4]))
        if verb == b"remove":
            try:
                typ, voff, vend = read_tl(value, 0, len(value))
            except DecodeError:
                return self._reply(comps, 400, "Malformed Name", None)
            found = self.fw.remove_aggregator(value[voff:vend])
            return self._reply(comps, 200 if found else 404,
                               "OK" if found else "No such training", None)
        try:
            config = AggregatorConfig.decode(value)
        except DecodeError as e:
            return self._reply(comps, 400, f"Malformed aggregator configuration: {e}", None)
        self.fw.configure_aggregator(config)
        return self._reply(comps, 200, "OK", None)

    @staticmethod
    def _parse_params(component: bytes) -> m.ControlParametersValue:
        try:
            value = Component.get_value(component)
            cp = m.ControlParameters.parse(value if value[:1] == b"\x68" else component,
                                           ignore_critical=True)
            if cp.cp is None:
                raise ControlError(400, "Malformed ControlParameters")
            return cp.cp
        except ControlError:
            raise
        except Exception:
            # python-ndn's parser raises DecodeError, IndexError, struct.error ... on hostile
            # input (found by fuzzing); any of them means the same: 400
            raise ControlError(400, "Malformed ControlParameters") from None

    def _name_of(self, params: m.ControlParametersValue) -> tuple[bytes, int]:
        if params.name is None:
            raise ControlError(400, "Name is required", params)
        prefix = b"".join(bytes(c) for c in params.name)
        try:
            depth = len(component_offsets(prefix))
        except DecodeError:          # python-ndn parses a Name without checking its components
            raise ControlError(400, "Malformed Name", None) from None
        if depth > self.fw.fib.max_depth:
            raise ControlError(414, "Route prefix has too many components", params)
        return prefix, depth

    def _face_of(self, params: m.ControlParametersValue, in_face: int) -> int:
        face = params.face_id or in_face
        if face not in self.fw.faces:
            raise ControlError(410, "Face not found", params)
        return face

    async def _rib_register(self, params, in_face):
        prefix, depth = self._name_of(params)
        params.face_id = self._face_of(params, in_face)
        params.origin = params.origin or 0
        params.cost = params.cost or 0
        params.flags = CHILD_INHERIT if params.flags is None else params.flags
        expires = None
        if params.expiration_period is not None:
            expires = self.fw.clock() + params.expiration_period / 1000.0
        self.fw.rib.add(prefix, depth, Route(params.face_id, params.origin, params.cost,
                                             params.flags, expires))
        return params

    async def _rib_unregister(self, params, in_face):
        prefix, _ = self._name_of(params)
        params.face_id = params.face_id or in_face
        params.origin = params.origin or 0
        self.fw.rib.remove(prefix, params.face_id, params.origin)
        return params

    async def _faces_create(self, params, in_face):
        """NFD's faces/create. Of the flags only LpReliabilityEnabled is implemented (local
        fields and congestion marking: 406); it applies to a face this command creates."""
        if params.uri is None:
            raise ControlError(400, "Uri is required", params)
        if self.create_face is None:
            raise ControlError(501, "Face creation unavailable", params)
        reliability = self._reliability_asked(params, 406)
        persistency = params.face_persistency.value if params.face_persistency is not None else 0
        try:
            face_id, created = await self.create_face(params.uri, persistency)
        except ValueError as e:
            raise ControlError(406, str(e), params) from None
        except OSError as e:
            raise ControlError(504, f"Connection failed: {e}", params) from None
        if created and reliability is not None and self.set_reliability is not None:
            self.set_reliability(face_id, reliability)
        info = self.fw.faces.get(face_id)
        out = m.ControlParametersValue()
        out.face_id = face_id
        out.uri = info.remote_uri
        out.local_uri = info.local_uri
        out.face_persistency = m.FacePersistency(info.persistency)
        out.flags = LP_RELIABILITY if info.lp_reliability is not None else 0
        out.mtu = info.mtu
        if not created:
            raise ControlError(409, "Face with remote URI already exists", out)
        return out

    @staticmethod
    def _reliability_asked(params, unsupported_status: int) -> bool | None:
        """LpReliabilityEnabled as Flags/Mask ask for it (None: not asked); Flags without
        Mask is 400, any other flag asked for is `unsupported_status`."""
        if (params.flags is None) != (params.mask is None):
            raise ControlError(400, "Flags and Mask must come together", params)
        if params.mask is None:
            return None
        if params.mask & params.flags & ~LP_RELIABILITY:
            raise ControlError(unsupported_status, "Only LpReliabilityEnabled can be set", params)
        return bool(params.flags & LP_RELIABILITY) if params.mask & LP_RELIABILITY else None

    async def _faces_update(self, params, in_face):
        """NFD's faces/update: of the flags only LpReliabilityEnabled can change (local fields
        and congestion marking are not implemented: asking for them is 409); persistency
        cannot change."""
        face = params.face_id or in_face
        info = self.fw.faces.get(face)
        if info is None:
            raise ControlError(404, "Specified face does not exist", params)
        on = self._reliability_asked(params, 409)
        if params.face_persistency is not None and \
                params.face_persistency.value != info.persistency:
            raise ControlError(409, "Changing the persistency is not supported", params)
        if on is not None and (self.set_reliability is None
                               or not self.set_reliability(face, on)):
            raise ControlError(404, "Specified face does not exist", params)
        out = m.ControlParametersValue()
        out.face_id = face
        out.face_persistency = m.FacePersistency(info.persistency)
        out.flags = LP_RELIABILITY if info.lp_reliability is not None else 0
        return out

    async def _faces_destroy(self, params, in_face):
        if params.face_id is None:
            raise ControlError(400, "FaceId is required", params)
        if self.destroy_face is not None:
            self.destroy_face(params.face_id)
        return params     # NFD: 200 even if the face did not exist

    async def _strategy_set(self, params, in_face):
        prefix, depth = self._name_of(params)
        if params.strategy is None or params.strategy.name is None:
            raise ControlError(400, "Strategy is required", params)
        strategy_name = "/" + "/".join(bytes(Component.get_value(c)).decode(errors="replace")
                                       for c in params.strategy.name)
        try:
            self.fw.strategy_choice.set(prefix, depth, strategy_by_name(strategy_name))
        except UnknownStrategy as e:
            raise ControlError(404, str(e), params) from None
        except ValueError as e:                 # its parameters (NFD: 409)
            raise ControlError(409, f"Error instantiating strategy: {e}", params) from None
        return params

    async def _strategy_unset(self, params, in_face):
        prefix, _ = self._name_of(params)
        if not prefix:
            raise ControlError(400, "cannot unset the root strategy", params)
        self.fw.strategy_choice.unset(prefix)
        return params

    def _reply(self, comps: list[bytes], code: int, text: str,
               params: m.ControlParametersValue | None) -> bytes:
        try:
            content = _response(code, text, params)
        except (IndexError, ValueError, TypeError, OverflowError, struct.error):
            # parameters that parsed but cannot be encoded back (found by fuzzing: python-ndn
            # may size a field one way and write it another): say so
            content = _response(400, "Malformed ControlParameters", None)
        return bytes(make_data(comps, MetaInfo(), content, signer=self._signer))

    # ---- status datasets -----------------------------------------------------------------

    def _dataset(self, interest: Interest, comps: list[bytes], key: tuple[bytes, bytes]) -> bytes | None:
        """Segmented status dataset, named /localhost/nfd/<module>/list/<version>/<segment>."""
        if len(comps) >= 6:      # a later segment of an earlier version
            base = b"".join(comps[:5])
            segs = self._datasets.get(base)
            try:
                seg = Component.to_number(comps[5])
            except (ValueError, IndexError):
                return None
            if segs is None or seg >= len(segs):
                return None
            return self._segment(comps[:5], segs, seg)
        payload = self._lists[key]()
        version = Component.from_version(time.time_ns() // 1000)
        base_comps = comps[:4] + [bytes(version)]
        segs = segment(payload)
        self._datasets[b"".join(base_comps)] = segs
        while len(self._datasets) > 16:          # bounded: keep the newest versions only
            del self._datasets[next(iter(self._datasets))]
        return self._segment(base_comps, segs, 0)

    def _segment(self, base_comps: list[bytes], segs: list[bytes], seg: int) -> bytes:
        name = base_comps + [bytes(Component.from_segment(seg))]
        meta = MetaInfo(freshness_period=DATASET_FRESHNESS_MS,
                        final_block_id=bytes(Component.from_segment(len(segs) - 1)))
        return bytes(make_data(name, meta, segs[seg], signer=self._signer))

    def _faces_list(self) -> bytes:
        msg = m.FaceStatusMsg()
        msg.face_status = []
        for info in self.fw.faces:
            fs = m.FaceStatus()
            c = info.counters
            fs.face_id = info.id
            fs.uri = info.remote_uri
            fs.local_uri = info.local_uri
            fs.face_scope = m.FaceScope.LOCAL if info.local else m.FaceScope.NON_LOCAL
            fs.face_persistency = m.FacePersistency(info.persistency)
            fs.link_type = m.FaceLinkType.POINT_TO_POINT
            fs.mtu = info.mtu
            fs.n_in_interests, fs.n_in_data, fs.n_in_nacks = c.in_interests, c.in_data, c.in_nacks
            fs.n_out_interests, fs.n_out_data, fs.n_out_nacks = (c.out_interests, c.out_data,
                                                                 c.out_nacks)
            fs.n_in_bytes, fs.n_out_bytes = c.in_bytes, c.out_bytes
            fs.flags = LP_RELIABILITY if info.lp_reliability is not None else 0
            msg.face_status.append(fs)
        return bytes(msg.encode())

    def _fib_list(self) -> bytes:
        msg = m.FibStatus()
        msg.entries = []
        for entry in self.fw.fib.entries():
            fe = m.FibEntry()
            fe.name = _components(entry.prefix)
            fe.next_hop_records = []
            for cost, face in entry.sorted_hops:
                nh = m.NextHopRecord()
                nh.face_id, nh.cost = face, cost
                fe.next_hop_records.append(nh)
            msg.entries.append(fe)
        return bytes(msg.encode())

    def _rib_list(self) -> bytes:
        now = self.fw.clock()
        msg = m.RibStatus()
        msg.entries = []
        for prefix, routes in self.fw.rib.entries():
            re = m.RibEntry()
            re.name = _components(prefix)
            re.routes = []
            for r in routes:
                rt = m.Route()
                rt.face_id, rt.origin, rt.cost, rt.flags = r.face, r.origin, r.cost, m.RouteFlags(r.flags & 3)
                if r.expires is not None:
                    rt.expiration_period = max(0, int((r.expires - now) * 1000))
                re.routes.append(rt)
            msg.entries.append(re)
        return bytes(msg.encode())

    def _strategy_list(self) -> bytes:
        msg = m.StrategyChoiceMsg()
        msg.strategy_choices = []
        for prefix, strategy in self.fw.strategy_choice.items():
            sc = m.StrategyChoice()
            sc.name = _components(prefix)
            sc.strategy = m.Strategy()
            sc.strategy.name = strategy.name
            msg.strategy_choices.append(sc)
        return bytes(msg.encode())

    def _status_general(self) -> bytes:
        fw = self.fw
        st = m.GeneralStatus()
        st.nfd_version = "ndnps-0.1"
        st.start_timestamp = int(self.start_time * 1000)
        st.current_timestamp = int(time.time() * 1000)
        st.n_name_tree_entries = 0
        st.n_fib_entries = len(fw.fib)
        st.n_pit_entries = len(fw.pit)
        st.n_measurement_entries = 0
        st.n_cs_entries = len(fw.cs)
        c = fw.counters
        st.n_in_interests, st.n_in_data, st.n_in_nacks = c.in_interests, c.in_data, c.in_nacks
        st.n_out_interests, st.n_out_data, st.n_out_nacks = c.out_interests, c.out_data, c.out_nacks
        st.n_satisfied_interests, st.n_unsatisfied_interests = c.satisfied, c.unsatisfied
        return bytes(st.encode())

    def _ppit_list(self) -> bytes:
        """Persistent PIT entries, shaped like fib/list: Name + (FaceId, remaining ms)."""
        now = self.fw.clock()
        msg = m.FibStatus()
        msg.entries = []
        for entry in self.fw.ppit.entries():
            fe = m.FibEntry()
            fe.name = _components(entry.prefix)
            fe.next_hop_records = []
            for face, expires in entry.faces.items():
                nh = m.NextHopRecord()
                nh.face_id, nh.cost = face, max(0, int((expires - now) * 1000))
                fe.next_hop_records.append(nh)
            msg.entries.append(fe)
        return bytes(msg.encode())

    def _ndnps_status(self) -> bytes:
        """Everything a test or a user wants in one JSON document: counters by face
        (drops by reason included), table sizes, persistent entries."""
        return json.dumps(status_snapshot(self.fw)).encode()


def status_snapshot(fw: Forwarder) -> dict:
    now = fw.clock()
    faces = []
    for info in fw.faces:
        c = asdict(info.counters)
        c["drops"] = dict(info.counters.drops)
        faces.append({"id": info.id, "remote": info.remote_uri, "local": info.local_uri,
                      "scope": "local" if info.local else "non-local",
                      "persistency": info.persistency, "counters": c,
                      "mtu": info.mtu,
                      "lp_reliability": (None if info.lp_reliability is None
                                         else info.lp_reliability.as_dict()),
                      "lp_fragmentation": (None if info.lp_fragmentation is None
                                           else info.lp_fragmentation.as_dict()),
                      "send_queue": (None if info.send_queue is None
                                     else info.send_queue.as_dict())})
    return {
        "counters": {**asdict(fw.counters), **asdict(fw.faces.counters)},
        "tables": {"fib": len(fw.fib), "pit": len(fw.pit), "cs": len(fw.cs),
                   "cs_bytes": fw.cs.bytes, "dead_nonces": len(fw.dnl), "ppit": len(fw.ppit)},
        "faces": faces,
        "fib": [{"prefix": name_to_str(e.prefix),
                 "nexthops": [{"face": f, "cost": c} for c, f in e.sorted_hops]}
                for e in fw.fib.entries()],
        "ppit": [{"prefix": name_to_str(e.prefix),
                  "faces": {str(f): round(exp - now, 3) for f, exp in e.faces.items()}}
                 for e in fw.ppit.entries()],
        "aggregation": None if fw.aggregation is None else fw.aggregation.status(),
    }


