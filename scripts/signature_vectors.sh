#!/usr/bin/env bash
# Reference vectors for the experiment input signature (docs/contract.md, "Input signature"):
# builds scripts/signature-vectors (Jackson 3 writing the payloads the search-relevance plugin
# hashes) with Maven and writes, for every case of scripts/signature-vectors/cases.json, its
# canonical strings and SHA-256 hashes to tests/unit/experiments/signature_vectors.json, which
# tests/unit/experiments/test_signature.py compares with the workbench's. Run by hand after
# changing the cases; the tests only read the file it writes.
#
# Jackson writes a double with Double.toString, whose digits changed in Java 19 (the shortest
# that read back, as Python's repr); the plugin runs in OpenSearch 3, on Java 21 or later, so the
# program runs on a Java of 19 or later: SIGNATURE_JAVA, else $JAVA_HOME's, else the newest under
# /usr/lib/jvm, else `java`.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT/scripts/signature-vectors"

feature() {  # the feature release of a java binary: 17, 21, 25 ...
  "$1" -XshowSettings:properties -version 2>&1 \
    | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p'
}

java_bin=""
for candidate in ${SIGNATURE_JAVA:-} ${JAVA_HOME:+$JAVA_HOME/bin/java} \
    $(ls -d /usr/lib/jvm/*/bin/java 2>/dev/null | sort -rV) "$(command -v java || true)"; do
  if [[ -x "$candidate" && "$(feature "$candidate")" -ge 19 ]]; then
    java_bin="$candidate"
    break
  fi
done
if [[ -z "$java_bin" ]]; then
  echo "no Java 19 or later found (set SIGNATURE_JAVA to its java binary)" >&2
  exit 1
fi

mvn -q -B package dependency:build-classpath -Dmdep.outputFile=target/classpath
"$java_bin" -cp "target/classes:$(cat target/classpath)" vectors.SignatureVectors \
  cases.json "$REPO_ROOT/tests/unit/experiments/signature_vectors.json"
echo "wrote tests/unit/experiments/signature_vectors.json with $java_bin"
