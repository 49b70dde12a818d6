"""Parse throughput of Python's feedparser over a directory of feed
documents (the corpus `cargo bench --bench feed_refresh` writes), best of
three passes. Prints `mb_per_s=<n>`."""

import pathlib
import sys
import time

import feedparser


def main(directory: str) -> None:
    documents = [path.read_bytes() for path in sorted(pathlib.Path(directory).glob("*.xml"))]
    total = sum(len(document) for document in documents)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for document in documents:
            parsed = feedparser.parse(document)
            assert parsed.entries, "feedparser found no entries"
        best = min(best, time.perf_counter() - started)
    print(f"documents={len(documents)} bytes={total}")
    print(f"mb_per_s={total / 1e6 / best:.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
