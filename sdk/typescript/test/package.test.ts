// The package as users load it: ESM and CommonJS builds with the same exports, and one version
// everywhere (package.json, the SDK, the server's workspace, the API contract).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';

import * as esm from '@hutch/sdk';

const require = createRequire(import.meta.url);
const root = new URL('../', import.meta.url);
const repo = new URL('../../../', import.meta.url);

describe('package', () => {
  it('loads with require() and exports the same names as the ESM build', () => {
    const cjs = require('@hutch/sdk');
    assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort());
    assert.equal(typeof cjs.Sandbox.create, 'function');
    const e = new cjs.SandboxStoppedError('stopped', { status: 409, code: 'sandbox_stopped' });
    assert.ok(e instanceof cjs.ConflictError && e instanceof cjs.HutchError && e instanceof Error);
    assert.equal(e.name, 'SandboxStoppedError');
    const t = require('@hutch/sdk/transport');
    assert.equal(t.buildRequest('sandboxes.get', { id: 'x' }).path, '/v1/sandboxes/x');
  });

  it('points its exports at files that exist', () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
    const files = (v: unknown): string[] =>
      typeof v === 'string' ? [v] : Object.values(v as Record<string, unknown>).flatMap(files);
    for (const file of files(pkg.exports)) assert.ok(existsSync(new URL(file, root)), `${file} exists`);
    assert.ok(existsSync(new URL(pkg.types, root)));
    assert.equal(pkg.dependencies, undefined, 'no runtime dependencies');
  });

  it('has the version of the hutch workspace and of the API contract', () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
    assert.equal(esm.VERSION, pkg.version);
    const cargo = new URL('Cargo.toml', repo);
    if (existsSync(cargo)) {
      const ws = /\[workspace\.package\][^[]*?\nversion\s*=\s*"([^"]+)"/.exec(readFileSync(cargo, 'utf8'));
      assert.equal(ws?.[1], pkg.version, 'Cargo.toml [workspace.package] version');
      const api = /\ninfo:\n(?:[ ].*\n)*?[ ]+version:\s*(\S+)/.exec(readFileSync(new URL('spec/openapi.yaml', repo), 'utf8'));
      assert.equal(api?.[1], pkg.version, 'spec/openapi.yaml info.version');
    }
  });
});
