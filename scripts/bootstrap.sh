# Sourced by the other scripts: installs what the project needs on first use (a .venv from the
# requirements files, the pinned CDK CLI with `npm ci`, DynamoDB Local), again only when those change.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

stamp=".venv/.installed-$(cat requirements*.txt pyproject.toml hybridsync/cdk/requirements-runtime.txt examples/shop/pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setting up .venv (first run or requirements changed)..." >&2
  python3 -m venv .venv
  # -qq: errors only (pip's warnings about index folders a machine's pip config names but lacks,
  # and setuptools' notes on editable installs, are not the newcomer's to act on)
  .venv/bin/python -m pip install -qq --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -qq --disable-pip-version-check -r requirements-dev.txt
  rm -f .venv/.installed-* && touch "$stamp"
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "installing the pinned CDK CLI (npm ci)..." >&2
  npm ci --no-fund --no-audit --loglevel=error
fi

# AWS's DynamoDB Local (the local app's DynamoDB), fetched once into the user's cache folder.
.venv/bin/python -m hybridsync.local.dynamodb_local >/dev/null

export PATH="$PWD/.venv/bin:$PWD/node_modules/.bin:$PATH"
export VIRTUAL_ENV="$PWD/.venv"
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1  # Node 20 end-of-life banner from jsii
# and, past its end of life (2026-10-30), jsii's red banner, silenced for this Node's major version
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="$(node -p 'process.versions.node.split(".")[0]')"
