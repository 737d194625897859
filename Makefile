# One virtualenv, made and filled from this project's own files.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PROTOS := $(wildcard proto/coord/v1/*.proto)
SEEDS  ?= 10000
NODES  ?= 3

.PHONY: all venv proto run test lint soak bench bench-readonly clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP) coord/v1/.generated

# Generated protobuf/gRPC code is not committed; this target reproduces it from proto/.
coord/v1/.generated: $(PROTOS) $(STAMP)
	$(PY) -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. $(PROTOS)
	touch $@

proto: $(STAMP)
	rm -f coord/v1/.generated
	$(MAKE) coord/v1/.generated

run: venv
	$(VENV)/bin/coord dev --nodes $(NODES)

test: venv
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

lint: venv
	$(VENV)/bin/ruff check .

soak: venv
	$(PY) -m coord.raft.simulate --seeds $(SEEDS) --nodes both --jobs 2

bench: venv
	$(VENV)/bin/coord bench raft

# Needs Debian's zookeeper package (apt-get install -y zookeeper) for the ZooKeeper side.
bench-readonly: venv
	$(PY) -m pip install -q -e '.[bench]'
	$(VENV)/bin/coord bench readonly

clean:
	rm -rf $(VENV) coord/v1/*_pb2*.py coord/v1/*_pb2.pyi coord/v1/.generated
