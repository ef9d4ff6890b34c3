# rdma-llm-cluster: the two commands a new user needs are `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOSTS  ?= 2
RAILS  ?= 1
LEAVES ?= 1
SPINES ?= 0
INVENTORY ?= inventory/lab
# The lab's podman settings (ulimits, runc) without touching /etc/containers.
export CONTAINERS_CONF := $(CURDIR)/.lab/containers.conf
export PATH := $(CURDIR)/$(BIN):$(PATH)
# The lab's vault password file (the lab's MUNGE key, lab/vault.py), written by `lab up`: no lab run prompts for it.
ifneq ($(wildcard .lab/vault-pass),)
export ANSIBLE_VAULT_IDENTITY_LIST ?= lab@$(CURDIR)/.lab/vault-pass
endif

.PHONY: help setup host-packages venv collection lock lint test test-fast demo validate lab-up lab-down lab-status image clean

help:  ## List targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

setup: host-packages venv collection  ## Install host packages (apt), the pinned controller venv, the collection link

host-packages:  ## apt packages the lab needs (podman, runc, mmdebstrap, ...)
	$(PYTHON) -m lab host-packages

venv: $(BIN)/.installed  ## Controller venv (.venv) from requirements + constraints

$(BIN)/.installed: requirements.txt constraints.txt payload/requirements.txt payload/constraints.txt payload/requirements-testdata.txt
	$(PYTHON) -m venv $(VENV)
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(BIN)/pip install -q -r requirements.txt -r payload/requirements.txt
	$(BIN)/pip install -q --no-deps -r payload/requirements-testdata.txt
	touch $@

# ansible.cfg's collections_path holds this checkout as rdma_llm.cluster, so FQCNs (roles, plugins, playbooks)
# resolve in place as they do installed; the link is relative, so a moved checkout keeps it.
COLLECTION_LINK := .ansible/collections/ansible_collections/rdma_llm/cluster
collection:  ## Link this checkout as the collection rdma_llm.cluster (.ansible/collections)
	@mkdir -p $(dir $(COLLECTION_LINK)) && ln -sfn ../../../.. $(COLLECTION_LINK)

lock:  ## Re-resolve the controller lock (constraints.txt) from requirements.txt
	rm -rf .cache/lockvenv && $(PYTHON) -m venv .cache/lockvenv
	PIP_CONSTRAINT=$(CURDIR)/payload/constraints.txt .cache/lockvenv/bin/pip install -q -r requirements.txt -r payload/requirements.txt
	{ echo "# Lock for the controller venv: requirements.txt + payload/requirements.txt, pip freeze on Python 3.11."; \
	  echo "# Regenerate with: make lock"; .cache/lockvenv/bin/pip freeze; } > constraints.txt

lint: venv  ## ansible-lint (production), yamllint, ruff
	$(BIN)/pytest -m lint

test: setup  ## Everything: lint + Molecule + lab end-to-end + payload + switch (one pytest summary)
	$(BIN)/pytest -n 2

image: venv  ## Build the lab host image (mmdebstrap + podman import), cached
	$(BIN)/python -m lab image

validate: venv  ## Validation ladder on INVENTORY (default the lab): verdict in artifacts/validate/<time>/
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/validate.yml $(ARGS)

lab-up: venv  ## Start the lab cluster (HOSTS=1..32, more than 8 on LEAVES=2.. SPINES=1, a leaf-spine fabric; RAILS=2 NICs per host)
	$(BIN)/python -m lab up --hosts $(HOSTS) --leaves $(LEAVES) --spines $(SPINES) --rails $(RAILS)

lab-down:  ## Remove every lab container, network and process
	$(PYTHON) -m lab down

lab-status:  ## Show the lab
	$(PYTHON) -m lab status

demo: setup  ## Build the lab, run site.yml on it, print where the results are
	$(BIN)/python -m lab demo --hosts $(HOSTS) --rails $(RAILS)

clean: lab-down  ## Remove the lab, the venv and caches
	rm -rf $(VENV) .ansible .cache .lab artifacts
