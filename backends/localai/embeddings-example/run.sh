#!/bin/bash
# LocalAI-style launcher (unused by the Pants build, which writes its own run.sh).
source $(dirname $0)/../common/libbackend.sh
startBackend $@
