#!/usr/bin/env bash
# The failover measurement, run by hand (not by CI): a Redis topology with replicas, two
# `flowgate serve` nodes under steady load, primaries SIGKILLed; prints the window decided by
# the failure policies, when limits are exact again, over-admission against each policy's
# allowance, jobs lost or delivered again after their ack, rules and breakers survived.
#
#   scripts/failover.sh                   # TOPOLOGY=cluster, one primary then one machine killed
#   SOAK=600 scripts/failover.sh          # 10 minutes, a primary killed every 60 s
#   TOPOLOGY=sentinel scripts/failover.sh # a primary, then a primary and a sentinel
#   TOPOLOGY=cluster DEADLINE=100ms PROFILE=dev scripts/failover.sh
#
# TOPOLOGY: cluster (3 primaries, each with a replica, cluster-node-timeout 1000 ms;
#   FULL_COVERAGE=no sets cluster-require-full-coverage no), or sentinel (a primary, its
#   replica and 3 sentinels, quorum 2, down-after-milliseconds 1000, failover-timeout 3000).
# DEADLINE: the nodes' --redis-deadline (default 100ms). PROFILE: release (default) or dev.
# Needs redis-server, redis-sentinel and redis-cli 7.x.
set -euo pipefail
cd "$(dirname "$0")/.."
export TOPOLOGY="${TOPOLOGY:-cluster}" SOAK="${SOAK:-0}" DEADLINE="${DEADLINE:-100ms}"
profile=()
if [ "${PROFILE:-release}" = release ]; then profile=(--release); fi
exec cargo test "${profile[@]}" -p flowgate-server --test failover_measure -- \
    --ignored --nocapture --test-threads 1 measure
