"""Probe (issue 13): how much GPU time a stream spends on a command that is not a kernel.

The torch engine's Timelines show four events in a row on a busy stream taking 3.9 µs, and
`measure.ar_us` of a lone one-rank all_reduce (five event commands) 6.5 µs: about 1.3 µs per
event. This probe measures it directly, world size 1, no process group:
    python stream_command_probe.py OUT.json
Behind a GPU sleep (the stream busy, so every command waits for the one before), it records N
timing events back to back and reads the spacing between consecutive ones; then the same with
a tiny kernel between events, and on an idle stream (each event recorded after the previous one
fired). Three repeats each. Prints a summary; writes the spacings to OUT.json. It drives PyTorch
only.
"""
import json
import statistics
import sys
import time

import torch

EVENTS = 64
REPEATS = 3


def spacings(events):
    return [events[i].elapsed_time(events[i + 1]) * 1e3 for i in range(len(events) - 1)]


def busy_events(stream, kernel_between):
    with torch.cuda.stream(stream):
        torch.cuda._sleep(5_000_000)
        events = []
        x = torch.zeros(1, device="cuda")
        for _ in range(EVENTS):
            event = torch.cuda.Event(enable_timing=True)
            event.record(stream)
            events.append(event)
            if kernel_between:
                x.add_(1)
    torch.cuda.synchronize()
    return spacings(events)


def idle_events(stream):
    events = []
    for _ in range(EVENTS):
        event = torch.cuda.Event(enable_timing=True)
        event.record(stream)
        event.synchronize()
        time.sleep(0.0002)
        events.append(event)
    return spacings(events)


def summary(values):
    ordered = sorted(values)
    return {
        "median_us": statistics.median(ordered),
        "p10_us": ordered[len(ordered) // 10],
        "p90_us": ordered[len(ordered) * 9 // 10],
    }


def main():
    out = sys.argv[1]
    stream = torch.cuda.Stream()
    busy_events(stream, False)  # warm-up: module load, first launches
    result = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "events": EVENTS,
        "repeats": [],
    }
    for repeat in range(REPEATS):
        row = {
            "busy_events_only": busy_events(stream, False),
            "busy_event_kernel_event": busy_events(stream, True),
            "idle_events": idle_events(stream),
        }
        result["repeats"].append(row)
        print(
            "repeat %d: " % repeat
            + ", ".join("%s %s" % (k, {a: round(b, 3) for a, b in summary(v).items()})
                        for k, v in row.items())
        )
    with open(out, "w") as handle:
        json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
