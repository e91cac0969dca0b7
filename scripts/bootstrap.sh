# Sourced by the other scripts: installs what the project needs on first use (a .venv from the
# requirements files, the pinned CDK CLI with `npm ci`, DynamoDB Local), again only when those change.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# pip's output, shown as progress: the packages collected so far and the time taken, on one line
# rewritten in place on a terminal (a line every 20 packages in a log)
progress() {
  local started=$SECONDS count=0 line
  while IFS= read -r line; do
    case "$line" in
      Collecting*)
        count=$((count + 1))
        if [ -t 2 ]; then
          printf '\r  %3d packages collected (%3ds): %-36.36s' "$count" $((SECONDS - started)) "${line#Collecting }" >&2
        elif [ $((count % 20)) -eq 0 ]; then
          echo "  $count packages collected ($((SECONDS - started))s)" >&2
        fi ;;
      "Installing collected packages"*)
        if [ -t 2 ]; then printf '\r%-80s\r' '' >&2; fi
        echo "  $count packages collected ($((SECONDS - started))s); installing them..." >&2 ;;
    esac
  done
  echo "  installed in $((SECONDS - started))s" >&2
}

stamp=".venv/.installed-$(cat requirements*.txt pyproject.toml hybridsync/cdk/requirements-runtime.txt examples/shop/pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setting up .venv (first run or requirements changed): about 120 packages, 4 minutes on a first" \
    "run (less with pip's cache warm); later runs start in seconds..." >&2
  python3 -m venv .venv
  # -qq, and pip's stderr shown only if it fails: pip's warnings about index folders a machine's pip
  # config names but lacks, and setuptools' notes on editable installs, are not the newcomer's to act on
  .venv/bin/python -m pip install -qq --disable-pip-version-check --upgrade pip
  errors="$(mktemp)"
  if ! .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off \
      -r requirements-dev.txt 2>"$errors" | progress; then
    cat "$errors" >&2
    rm -f "$errors"
    exit 1
  fi
  rm -f "$errors"
  rm -f .venv/.installed-* && touch "$stamp"
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "installing the pinned CDK CLI (npm ci)..." >&2
  npm ci --no-fund --no-audit --loglevel=error
fi

# AWS's DynamoDB Local (the local app's DynamoDB), fetched once into the user's cache folder.
.venv/bin/python -m hybridsync.local.dynamodb.server >/dev/null
# the live console's two scripts (htmx), pinned npm packages, fetched once into the same cache
.venv/bin/python -m hybridsync.local.console.scripts >/dev/null \
  || echo "the console's scripts could not be fetched: \`hybridsync up\` runs without its console" >&2

export PATH="$PWD/.venv/bin:$PWD/node_modules/.bin:$PATH"
export VIRTUAL_ENV="$PWD/.venv"
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1  # Node 20 end-of-life banner from jsii
# and, past its end of life (2026-10-30), jsii's red banner, silenced for this Node's major version
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="$(node -p 'process.versions.node.split(".")[0]')"
