// The shared test vectors (spec/test-vectors/sdk-v1.json), without a network: for every
// operation the transport builds exactly the vector's request and decodes its response into the
// documented result; every error response throws the named class with the server's message.
// The Python SDK passes the same file.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';

import * as hutch from '@hutch/sdk';
import { OPERATIONS, buildRequest, decodeResponse, encodeBody } from '@hutch/sdk/transport';

/* eslint-disable @typescript-eslint/no-explicit-any */
const VECTORS = process.env.HUTCH_VECTORS ?? new URL('../../../spec/test-vectors/sdk-v1.json', import.meta.url);
const DATA = JSON.parse(readFileSync(VECTORS, 'utf8'));

const b64 = (s: string) => new Uint8Array(Buffer.from(s, 'base64'));
const camel = (s: string) => s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
/** Maps the user owns: their keys are compared as they are. */
const VERBATIM = new Set(['metadata', 'env', 'data']);

/**
 * Every field the vector names has that value on the decoded result, through the SDK's
 * documented mapping: a snake_case field is the camelCase property (`exit_code` ->
 * `exitCode`), a key ending in `_b64` names bytes (`stdout_bytes_b64` is the `stdoutBytes`
 * property, `data_b64` the result itself when it is bytes), and null matches null or absent.
 */
function assertMatches(actual: any, expected: any, where = 'result', verbatim = false): void {
  if (expected === null) {
    assert.equal(actual ?? null, null, `${where}: expected null, got ${JSON.stringify(actual)}`);
    return;
  }
  if (typeof expected !== 'object') {
    assert.equal(actual, expected, `${where}: ${JSON.stringify(actual)} != ${JSON.stringify(expected)}`);
    return;
  }
  if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${where}: expected an array, got ${JSON.stringify(actual)}`);
    assert.equal(actual.length, expected.length, `${where}: ${actual.length} items, expected ${expected.length}`);
    expected.forEach((e, i) => assertMatches(actual[i], e, `${where}[${i}]`));
    return;
  }
  assert.ok(actual !== null && typeof actual === 'object', `${where}: expected an object, got ${actual}`);
  for (const [key, value] of Object.entries(expected)) {
    if (!verbatim && key.endsWith('_b64')) {
      const name = key.slice(0, -'_b64'.length);
      const got = actual instanceof Uint8Array && name === 'data' ? actual : actual[camel(name)];
      assert.ok(got instanceof Uint8Array, `${where}.${camel(name)}: expected bytes, got ${got}`);
      assert.deepEqual(Buffer.from(got), Buffer.from(b64(value as string)), `${where}.${camel(name)}`);
      continue;
    }
    const prop = verbatim ? key : camel(key);
    assert.ok(verbatim || prop in actual, `${where}: ${actual?.constructor?.name} has no property ${prop}`);
    assertMatches(actual[prop], value, `${where}.${prop}`, VERBATIM.has(key));
  }
}

function responseOf(r: any): hutch.HttpResponse {
  const headers: Record<string, string> = {};
  if (r.content_type) headers['content-type'] = r.content_type;
  if (r.json !== undefined) {
    return { status: r.status, headers: { 'content-type': 'application/json', ...headers }, body: new TextEncoder().encode(JSON.stringify(r.json)) };
  }
  return { status: r.status, headers, body: r.body_b64 !== undefined ? b64(r.body_b64) : new Uint8Array() };
}

describe('shared vectors: requests', () => {
  it('speaks version 1 of the vector file', () => assert.equal(DATA.version, 1));

  for (const v of DATA.operations) {
    it(`${v.name}: ${v.call.op} builds ${v.request.method} ${v.request.path}`, () => {
      const want = v.request;
      const req = buildRequest(v.call.op, v.call.args);
      assert.equal(req.method, want.method);
      assert.equal(req.path, want.path);
      const sent = encodeBody(req);
      if (want.json !== undefined) {
        assert.deepEqual(req.json, want.json);
        assert.equal(sent?.contentType, 'application/json');
        assert.deepEqual(JSON.parse(new TextDecoder().decode(sent!.body)), want.json);
      } else {
        assert.equal(req.json, undefined, 'no JSON body expected');
      }
      if (want.body_b64 !== undefined) {
        assert.deepEqual(Buffer.from(sent!.body), Buffer.from(b64(want.body_b64)));
      } else if (want.json === undefined) {
        assert.equal(sent, null, 'no body expected');
      }
      if (want.content_type !== undefined) assert.equal(sent?.contentType, want.content_type);
    });
  }
});

describe('shared vectors: responses', () => {
  for (const v of DATA.operations) {
    it(`${v.name}: ${v.call.op} decodes ${v.response.status}`, () => {
      const result = decodeResponse(v.call.op, responseOf(v.response));
      assertMatches(result, v.result);
    });
    it(`${v.name}: decodes the same from parsed JSON`, () => {
      if (v.response.json === undefined) return;
      const result = decodeResponse(v.call.op, { status: v.response.status, json: v.response.json });
      assertMatches(result, v.result);
    });
  }
});

describe('shared vectors: errors', () => {
  for (const e of DATA.errors) {
    const { status, json } = e.response;
    it(`${status} ${json.code} throws ${e.class}`, () => {
      const cls = (hutch as any)[e.class];
      assert.equal(typeof cls, 'function', `the SDK exports no ${e.class}`);
      for (const op of ['sandboxes.get', 'sandbox.exec', 'files.read']) {
        assert.throws(
          () => decodeResponse(op, responseOf(e.response)),
          (err: any) => {
            assert.ok(err instanceof cls, `${op}: ${err?.name} is not a ${e.class}`);
            assert.ok(err instanceof hutch.HutchError);
            assert.equal(err.name, e.class);
            assert.equal(err.message, json.message);
            assert.equal(err.code, json.code);
            assert.equal(err.status, status);
            return true;
          },
        );
      }
    });
  }

  it('every API error code has a class, and unknown codes fall back on the status', () => {
    const cases: [number, string | null, string][] = [
      [400, 'unsupported_media_type', 'InvalidRequestError'],
      [405, 'method_not_allowed', 'InvalidRequestError'],
      [404, 'no_such_process', 'NotFoundError'],
      [409, 'conflict', 'ConflictError'],
      [503, 'shutting_down', 'BackendUnavailableError'],
      [501, 'not_supported', 'NotSupportedError'],
      [502, 'sandbox_error', 'ServerError'],
      [507, 'insufficient_storage', 'ServerError'],
      [418, 'brand_new_code', 'InvalidRequestError'],
      [404, 'brand_new_code', 'NotFoundError'],
      [504, null, 'ServerError'],
    ];
    for (const [status, code, cls] of cases) {
      const body = code === null ? new TextEncoder().encode('gateway timeout') : new TextEncoder().encode(JSON.stringify({ code, message: 'm' }));
      assert.throws(
        () => decodeResponse('sandboxes.get', { status, body }),
        (err: any) => err.name === cls && err instanceof (hutch as any)[cls] && err.code === code,
        `${status} ${code}`,
      );
    }
    assert.ok(new hutch.SandboxStoppedError('x') instanceof hutch.ConflictError);
  });
});

describe('operations beyond the vectors', () => {
  it('knows every operation the high-level API uses', () => {
    for (const op of [
      'health', 'version', 'metrics',
      'sandboxes.create', 'sandboxes.get', 'sandboxes.list', 'sandboxes.delete', 'sandboxes.set_ttl',
      'sandbox.exec', 'sandbox.exec_stream',
      'processes.start', 'processes.list', 'processes.get', 'processes.signal', 'processes.write_stdin',
      'processes.close_stdin', 'processes.logs', 'processes.attach',
      'files.write', 'files.read', 'files.list', 'files.stat', 'files.make_dir', 'files.remove', 'files.rename',
      'contexts.create', 'contexts.list', 'contexts.run', 'contexts.run_stream', 'contexts.restart',
      'contexts.interrupt', 'contexts.delete',
      'pools.create', 'pools.list', 'pools.get', 'pools.delete',
      'keys.create', 'keys.list', 'keys.revoke', 'audit.list',
    ]) {
      assert.ok(OPERATIONS.includes(op), op);
    }
  });

  it('builds the rest of the API as the spec describes it', () => {
    const id = 'hutch-0123456789ab';
    const cases: [string, Record<string, unknown>, string, string, unknown?][] = [
      ['sandboxes.list', { include_stopped: true, limit: 5 }, 'GET', '/v1/sandboxes?include_stopped=true&limit=5'],
      ['sandboxes.list', { metadata: { team: 'ml', job: '42' } }, 'GET', '/v1/sandboxes?metadata=team%3Aml%2Cjob%3A42'],
      ['sandbox.exec_stream', { id, shell: 'ls' }, 'POST', `/v1/sandboxes/${id}/exec/stream`, { shell: 'ls' }],
      ['processes.signal', { id, pid: 7, signal: 9 }, 'POST', `/v1/sandboxes/${id}/processes/7/signal`, { signal: 9 }],
      ['processes.close_stdin', { id, pid: 7 }, 'POST', `/v1/sandboxes/${id}/processes/7/stdin/close`],
      ['processes.attach', { id, pid: 7 }, 'GET', `/v1/sandboxes/${id}/processes/7/attach`],
      ['files.write', { id, path: 'a b.txt', data: 'x', mode: 0o755 }, 'PUT', `/v1/sandboxes/${id}/files?path=a%20b.txt&mode=755`],
      ['files.remove', { id, path: '/tmp/d', recursive: true }, 'DELETE', `/v1/sandboxes/${id}/files?path=%2Ftmp%2Fd&recursive=true`],
      ['files.remove', { id, path: '/tmp/d', recursive: false }, 'DELETE', `/v1/sandboxes/${id}/files?path=%2Ftmp%2Fd`],
      ['files.make_dir', { id, path: 'a/b', parents: true }, 'POST', `/v1/sandboxes/${id}/files/mkdir`, { path: 'a/b', parents: true }],
      ['files.rename', { id, src: 'a', dst: 'b' }, 'POST', `/v1/sandboxes/${id}/files/move`, { from: 'a', to: 'b' }],
      ['contexts.run_stream', { id, context_id: 'ctx-1', code: '1', timeout_ms: 5 }, 'POST', `/v1/sandboxes/${id}/contexts/ctx-1/run/stream`, { code: '1', timeout_ms: 5 }],
      ['contexts.delete', { id, context_id: 'ctx-1' }, 'DELETE', `/v1/sandboxes/${id}/contexts/ctx-1`],
      ['pools.delete', { name: 'py' }, 'DELETE', '/v1/pools/py'],
      ['keys.create', { name: 'ci', max_sandboxes: 3 }, 'POST', '/v1/keys', { name: 'ci', max_sandboxes: 3 }],
      ['keys.revoke', { id: 'key_0a1b' }, 'DELETE', '/v1/keys/key_0a1b'],
      ['audit.list', { limit: 10 }, 'GET', '/v1/audit?limit=10'],
    ];
    for (const [op, args, method, path, json] of cases) {
      const req = buildRequest(op, args);
      assert.equal(req.method, method, op);
      assert.equal(req.path, path, op);
      assert.deepEqual(req.json, json, op);
    }
  });

  it('rejects unknown arguments and operations', () => {
    assert.throws(() => buildRequest('sandboxes.create', { ttlSeconds: 5 }), /unknown argument "ttlSeconds"/);
    assert.throws(() => buildRequest('sandboxes.frobnicate', {}), /unknown operation/);
    assert.throws(() => buildRequest('sandboxes.get', {}), /missing argument id/);
  });
});
