# One virtualenv, made and filled from this project's own files.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PROTOS := $(wildcard proto/coord/v1/*.proto proto/coord/etcdpb/*.proto)
SEEDS  ?= 10000
NODES  ?= 3
TLS    ?=

.PHONY: all venv proto run test test-slow lint docs soak diff etcd3-suite bench bench-readonly bench-scale bench-snapshot clean etcd-tools zookeeper-server bench-tui chaos chaos-long bench-audit bench-audit-sink java-runtime database-servers bench-spark bench-spark-full fuzz prometheus strace

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

# $(call debian-install,CHECK,PACKAGES): when the shell test CHECK fails (a tool or file is
# missing), apt-get install Debian's PACKAGES if we are root with apt, else say what to
# install. Tests that need them say what is missing (and fail under CI=true).
define debian-install
@if ! ( $(1) ) >/dev/null 2>&1; then \
  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
    echo "installing $(2) (Debian)"; \
    (apt-get install -y -q $(2) >/dev/null 2>&1 || \
     (apt-get update -q >/dev/null && apt-get install -y -q $(2) >/dev/null)) \
      || echo "warning: could not install $(2)"; \
  else \
    echo "note: missing, needs: apt-get install $(2) (as root)"; \
  fi; \
fi
endef

venv: $(STAMP) coord/v1/.generated etcd-tools java-runtime prometheus database-servers strace

# etcdctl and etcd (Debian's etcd-client/etcd-server, 3.4): the etcd-compatibility tests
# drive coord with clients nobody here wrote. Installed when missing and we are root with
# apt; otherwise those tests say what is missing (and fail under CI=true).
etcd-tools:
	$(call debian-install,command -v etcdctl && command -v etcd,etcd-client etcd-server)

# strace (Debian's): the storage tests kill a process between two of SQLite's writes with
# its syscall fault injection.
strace:
	$(call debian-install,command -v strace,strace)

# Prometheus and promtool (Debian's prometheus): the metrics tests lint a member's /metrics
# and the alert rules with promtool and scrape a real cluster with a real Prometheus.
# Installed when missing, as etcd-tools above.
prometheus:
	$(call debian-install,command -v promtool && command -v prometheus,prometheus)

# A Java runtime for Spark (the `pipeline` extra: `coord audit` and coord.spark):
# Debian's default-jre-headless when `java` is missing, as etcd-tools above.
java-runtime:
	$(call debian-install,command -v java,default-jre-headless)

# The Spark writer's databases (tests/spark): Debian's PostgreSQL server (15: binaries
# under /usr/lib/postgresql/15/bin; the tests run initdb and postgres as the postgres
# user, since both refuse root) and the JDBC drivers Spark's own df.write.jdbc baseline
# loads from /usr/share/java. Installed when missing, as etcd-tools above.
DB_PACKAGES := postgresql libpostgresql-jdbc-java libxerial-sqlite-jdbc-java
database-servers:
	$(call debian-install,ls /usr/lib/postgresql/*/bin/initdb && [ -e /usr/share/java/postgresql.jar ] && [ -e /usr/share/java/sqlite-jdbc.jar ],$(DB_PACKAGES))

# Generated protobuf/gRPC code is not committed; this target reproduces it from proto/
# (coord/v1 and coord/etcdpb).
coord/v1/.generated: $(PROTOS) $(STAMP)
	$(PY) proto/generate.py .
	touch $@ coord/etcdpb/.generated

proto: $(STAMP)
	rm -f coord/v1/.generated coord/etcdpb/.generated
	$(MAKE) coord/v1/.generated

# `make run TLS=1`: TLS and client certificates on both ports (it prints the client flags).
# Each member serves /metrics and /health on 127.0.0.1:7301.. (--listen-metrics-urls).
run: venv
	$(VENV)/bin/coord dev --nodes $(NODES) --metrics$(if $(TLS), --tls)

# Two pytest processes at once, the members' tests (tests/server) and the rest, each in
# a temp dir of its own: most tests wait on real processes, so one stream leaves a core
# idle. Either failing fails the target.
test: venv
	$(VENV)/bin/ruff check .
	@t=$$(mktemp -d); \
	$(PY) -m pytest -q -p no:cacheprovider --durations=10 -m "not slow" --basetemp=$$t/s \
	  tests/server > $$t/server.log 2>&1 & server=$$!; \
	$(PY) -m pytest -q -p no:cacheprovider --durations=10 -m "not slow" --basetemp=$$t/r \
	  --ignore=tests/server; rest=$$?; \
	wait $$server; srv=$$?; \
	echo "== tests/server"; cat $$t/server.log; \
	echo "tests/server: exit $$srv; the rest: exit $$rest"; \
	[ $$srv -eq 0 ] && [ $$rest -eq 0 ]

# The longer real-process runs `make test` leaves out (marked slow): etcd's side of
# coord bench scale, the overlapping-fault and delay chaos runs, the churn nemesis, ...
test-slow: venv
	$(PY) -m pytest -q --durations=20 -m slow

lint: venv
	$(VENV)/bin/ruff check .

# The manual (docs/, a MkDocs site) into build/docs; --strict: a broken link, a page
# missing from the nav or a reference to no object fails (tests/docs builds it too).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict -f docs/mkdocs.yml

soak: venv
	$(PY) -m coord.rafttest --seeds $(SEEDS) --nodes both --jobs 2

# Hostile input on every RPC of both APIs and on the peer port, FUZZ_EXAMPLES per RPC
# with fresh randomness (the suite runs 5 each, derandomized); prints how many requests
# each survived (`make fuzz FUZZ_EXAMPLES=200`).
FUZZ_EXAMPLES ?= 100
fuzz: venv
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -s -o timeout=0 -p no:cacheprovider \
	  tests/server/api/test_fuzz_api.py tests/server/etcd/test_fuzz_etcd.py \
	  tests/server/transport/test_fuzz_peer_port.py

# The differential test against real etcd (`make diff SEEDS=1000`; pytest runs 300 and 40
# auth sequences): the plain sequences, then the auth ones.
DIFF_SEEDS := $(if $(filter command line,$(origin SEEDS)),$(SEEDS),1000)
diff: venv
	$(PY) -m coord.testing.etcd_diff --seeds $(DIFF_SEEDS)
	$(PY) -m coord.testing.etcd_diff --auth --seeds $(DIFF_SEEDS)

# python-etcd3's own test suite against a one-member etcd 3.4 and a one-member coord,
# compared test by test (a few minutes). Not in `make test`: the suite (the etcd3 sdist's
# tests/) and two packages for it only are downloaded into ETCD3_SUITE_CACHE when missing.
ETCD3_SUITE_CACHE ?= .cache/etcd3-suite
etcd3-suite: venv
	$(PY) -m coord.testing.etcd3_suite --cache $(ETCD3_SUITE_CACHE)

# Long chaos runs: CHAOS_SECONDS each, one per seed; any violation fails.
# Partitions use network namespaces when run as root (else TCP gates).
CHAOS_SECONDS ?= 600
CHAOS_SEEDS   ?= 1 2 3
chaos: venv
	@for s in $(CHAOS_SEEDS); do \
	  $(VENV)/bin/coord chaos --seconds $(CHAOS_SECONDS) --seed $$s \
	    --out chaos-runs/seed$$s-$(CHAOS_SECONDS)s || exit 1; \
	done

# Every named crash point (coord.server.failpoints) and disk fault on a real cluster;
# `make test` runs a few of them.
.PHONY: crash-points
crash-points: venv
	COORD_CRASH_SWEEP=1 $(PY) -m pytest -q -p no:cacheprovider tests/server/test_crash_points.py tests/server/test_disk_faults.py tests/server/test_full_disk.py

# One long run outside CI (30 minutes by default): every nemesis kind, faults in
# overlapping pairs, every workload; the run directory keeps its history and report.html.
CHAOS_LONG_SECONDS ?= 1800
CHAOS_LONG_SEED    ?= 1
CHAOS_LONG_LIN_LIMIT ?= 60
chaos-long: venv
	$(VENV)/bin/coord chaos --seconds $(CHAOS_LONG_SECONDS) --seed $(CHAOS_LONG_SEED) \
	  --nemesis all --overlap --lin-time-limit $(CHAOS_LONG_LIN_LIMIT) \
	  --out chaos-runs/long-seed$(CHAOS_LONG_SEED)-$(CHAOS_LONG_SECONDS)s

bench: venv
	$(VENV)/bin/coord bench raft

# Needs Debian's zookeeper package (apt-get install -y zookeeper) for the ZooKeeper side.
bench-readonly: venv zookeeper-server
	$(PY) -m pip install -q -e '.[bench]'
	$(VENV)/bin/coord bench readonly

# ZooKeeper 3.8 (Debian's zookeeper: its jars under /usr/share/java) for the read-only
# benchmark's peer, installed when missing as etcd-tools above. Tests do not need it.
zookeeper-server:
	$(call debian-install,[ -e /usr/share/java/zookeeper.jar ],zookeeper)

# Memory and disk over a 30-minute hot-key soak and a growth to 1M keys, beside etcd 3.4
# (about an hour on this box; `coord bench scale --help` for smaller runs).
bench-scale: venv
	$(VENV)/bin/coord bench scale --seconds 1800 --sample-s 60 --keys 1000000

# A wiped follower's peak and steady RSS while a 1M-key snapshot reaches it (a few
# minutes: most of it filling the keys; `coord bench snapshot --help`).
bench-snapshot: venv
	$(VENV)/bin/coord bench snapshot --keys 1000000 --concurrency 16

# The console with 10,000 owners and keys: claim-to-row latency, idle and busy CPU.
bench-tui: venv
	$(VENV)/bin/coord bench tui

# The history pipeline at scale: synth, export and the PySpark audit, rows/s
# (`make bench-audit COMMANDS=1000000,10000000 MASTERS=local[2],local-cluster[2,1,1024]`;
# HISTORY_DIR=DIR keeps the synthesized histories there and reuses them on the next run).
COMMANDS ?= 1000000
MASTERS  ?= local[2]
HISTORY_DIR ?=
bench-audit: venv
	$(VENV)/bin/coord bench audit --commands $(COMMANDS) --masters '$(MASTERS)' \
		--history-dir '$(HISTORY_DIR)'

# The end-to-end audit of a fenced sink's log: a history with fenced Spark jobs in it and
# their sink's log of SINK_ROWS rows (ten million unless told), made in bounded memory
# and audited together, rows/s of each (`make bench-audit-sink SINK_ROWS=1000000` for a
# smaller one; MASTERS and HISTORY_DIR as above). Not in `make test`: the suite's test of
# it makes a few hundred rows.
SINK_ROWS ?= 10000000
bench-audit-sink: venv
	$(VENV)/bin/coord bench audit --commands 0 --export-entries 0 --sink-rows $(SINK_ROWS) \
		--masters '$(MASTERS)' --history-dir '$(HISTORY_DIR)'

# The fenced Spark writer vs Spark's own JDBC writer and a plain write, on SQLite,
# PostgreSQL and Parquet: 1M rows, 8 partitions, local[2] (many minutes).
bench-spark: venv
	$(VENV)/bin/coord bench spark

clean:
	rm -rf $(VENV) coord/v1/*_pb2*.py coord/v1/*_pb2.pyi coord/v1/.generated
	rm -f coord/etcdpb/*_pb2*.py coord/etcdpb/*_pb2.pyi coord/etcdpb/.generated
