"""The bench's yardstick for one storage request: the official Python SDK (azure-storage-blob).

Run by `cargo run --release --example bench` (phase `requests`) with the interpreter of a venv
the bench made under target/ (examples/bench/requirements.txt); not meant to be run by hand.

It holds a lease on a blob of its own and, on the schedule the bench gives, sends each round at
CLOCK_MONOTONIC `start + round * period`: first one request after the pause (a renew on even
rounds, an acquire that another lease refuses with 409 on odd ones), then `burst` renews back
to back. leasehold's own store runs the same schedule half a period later, so that the two
never overlap and share whatever else the machine does. Prints one JSON object: the latencies
in seconds, by kind, the process's CPU time over its requests (not its pauses) and their
count, the SDK's version, and how many rounds began more than 10 ms late.

The connection string comes from the environment (LEASEHOLD_BENCH_CONNECTION_STRING), never
from the command line. Retries are off (retry_total=0), as leasehold sends none.
"""

import json
import os
import sys
import time
import uuid

from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient
from azure.storage.blob import __version__ as sdk_version


def main():
    container, blob = sys.argv[1], sys.argv[2]
    start, period = float(sys.argv[3]), float(sys.argv[4])
    rounds, burst = int(sys.argv[5]), int(sys.argv[6])
    service = BlobServiceClient.from_connection_string(
        os.environ["LEASEHOLD_BENCH_CONNECTION_STRING"], retry_total=0
    )
    client = service.get_container_client(container).get_blob_client(blob)
    client.upload_blob(b"", overwrite=True)
    lease = client.acquire_lease(lease_duration=15, lease_id=str(uuid.uuid4()))
    # Warm up as leasehold's side does, a period before the first round: the connection, the
    # interpreter's caches.
    pause = start - period - time.clock_gettime(time.CLOCK_MONOTONIC)
    if pause > 0:
        time.sleep(pause)
    for _ in range(burst):
        lease.renew()

    def refused_acquire():
        try:
            client.acquire_lease(lease_duration=15, lease_id=str(uuid.uuid4()))
        except HttpResponseError as e:
            if e.status_code == 409:
                return
            raise
        raise SystemExit("an acquire that should have been refused succeeded")

    out = {"paced_renew": [], "paced_acquire": [], "burst_renew": [], "late": 0}
    cpu, requests = 0.0, 0
    for i in range(rounds):
        pause = start + i * period - time.clock_gettime(time.CLOCK_MONOTONIC)
        if pause > 0:
            time.sleep(pause)
        elif pause < -0.010:
            out["late"] += 1
        kind, request = (
            ("paced_renew", lease.renew) if i % 2 == 0 else ("paced_acquire", refused_acquire)
        )
        cpu_before = time.process_time()
        began = time.perf_counter()
        request()
        out[kind].append(time.perf_counter() - began)
        for _ in range(burst):
            began = time.perf_counter()
            lease.renew()
            out["burst_renew"].append(time.perf_counter() - began)
        cpu += time.process_time() - cpu_before
        requests += 1 + burst
    lease.release()
    out["cpu_s"], out["requests"] = cpu, requests
    out["version"] = "azure-storage-blob %s, Python %s" % (sdk_version, sys.version.split()[0])
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
