#!/usr/bin/env python3
"""Per-component breakdown of a simulator profile (crates/sim/PERFORMANCE.md).

Input: `perf script -F period,ip,sym` of a `perf record --call-graph dwarf` run of
`worldmesh simulate`. Each sample is charged to one component: to the allocator or to
memmove/memcpy if the sampled instruction is there, else to the innermost frame of its
call chain that matches a component pattern (so `think` inside `ReplicaManager::frame` is
think, and the `BinaryHeap::pop` of `GameMap::path` is think too).

Usage: sim-profile-breakdown.py PERF_SCRIPT_OUTPUT [DATAGRAMS]
With DATAGRAMS (the run's "datagrams sent"), also prints CPU µs per datagram.
"""
import collections
import re
import sys

ALLOC = re.compile(
    r'^(_int_malloc|_int_free|_int_realloc|malloc|cfree|free|realloc|malloc_consolidate'
    r'|unlink_chunk|__GI___libc_(malloc|free|realloc)|__rust_(alloc|dealloc|realloc)'
    r'|alloc::raw_vec|.*finish_grow|grow_|do_reserve_and_handle|tcache|__libc_malloc|__libc_free)')
MOVE = re.compile(r'^__mem(move|cpy|set)_')
# mimalloc (the `worldmesh` binary's allocator): a sample anywhere inside it, including the
# kernel's page faults under it, is allocation.
MIMALLOC = re.compile(r'^_?mi_[a-z]')
RULES = [(name, re.compile(p)) for name, p in [
    ('setup (matrix, map, nodes)',
     r'LatencyMatrix::parse|GameMap::generate|build_with_spares|clap_builder|workload::initial_objects'
     r'|scenario::report|RunSummary'),
    ('metrics collection', r'Collector<O>::sample|metrics::'),
    ('oracle locator', r'worldmesh_sim::oracle'),
    ('think / game', r'GameObject>::think|GameMap::|^think |ThinkContext|model::[A-Za-z]+::think|::think'),
    ('interest / prediction',
     r'maintain_interest|^wanted|is_interested|predicted|on_discovered|interest_box|position_ahead'
     r'|queue_locator|locator_ops'),
    ('delta encoding / send',
     r'encode_delta|encode_state|write_delta|queue_updates|packets_for|Packet>::encode|codec::.*encode'
     r'|send_packets|ReplicaManager<O>::flush|flush_peer|History<O>::push|on_send|Codec'),
    ('decoding / apply / acks',
     r'handle_packet|Packet>::decode|codec::.*decode|read_delta|read_full|apply_delta|apply_update'
     r'|apply_replica_state|on_ack|History<O>::position|decode_state'),
    ('network model', r'NetworkModel|LatencyMatrix::one_way|Links'),
    ('engine: event queue + dispatch',
     r'EventQueue|pop_due|BinaryHeap<.*Reverse|worldmesh_engine::queue|Engine<M,L,X>|Simulation<O>'
     r'|route_transmits|after_input|arm_timer'),
    ('node dispatch / framing',
     r'Frame::parse|wire::|Node<O> as worldmesh_core::machine::Machine>::handle_datagram'
     r'|on_replica_datagram|handle_datagram'),
    ('replica frame (other)', r'ReplicaManager<O>::frame|run_frame'),
]]


def classify(frames):
    if not frames:
        return 'other'
    if ALLOC.match(frames[0]) or any(MIMALLOC.match(f) for f in frames):
        return 'allocation (malloc/free/realloc)'
    if MOVE.match(frames[0]):
        return 'memmove / memcpy'
    for f in frames:
        for name, rx in RULES:
            if rx.search(f):
                return name
    return 'other'


def main():
    totals = collections.Counter()
    frames, period = [], 0

    def flush():
        nonlocal frames, period
        if period:
            totals[classify(frames)] += period
        frames, period = [], 0

    with open(sys.argv[1], errors='replace') as f:
        for line in f:
            s = line.strip()
            if not s:
                flush()
            elif re.fullmatch(r'\d+', s):
                flush()
                period = int(s)
            else:
                parts = s.split(None, 1)
                if len(parts) == 2 and re.fullmatch(r'[0-9a-f]+', parts[0]):
                    frames.append(parts[1])
    flush()
    total = sum(totals.values())
    datagrams = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    for name, v in totals.most_common():
        per = f'  {v / 1000 / datagrams:6.2f} µs/datagram' if datagrams else ''
        print(f'{name:36s} {100 * v / total:5.1f} %{per}')
    if datagrams:
        print(f'{"total":36s} 100.0 %  {total / 1000 / datagrams:6.2f} µs/datagram')


main()
