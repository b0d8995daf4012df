// Where the daemon listens: a Unix socket (the default, trusted, no key needed) or TCP.
import { HutchError } from './errors.js';

/** The daemon's default socket, as `hutch serve` creates it. */
export const DEFAULT_URL = 'unix:///run/hutch/hutch.sock';

export type Endpoint =
  | { kind: 'unix'; url: string; socketPath: string }
  | { kind: 'tcp'; url: string; protocol: 'http:' | 'https:'; host: string; port: number };

/**
 * Parses `unix:///path/to.sock`, an absolute socket path, or `http://host[:port]`
 * (`https://` for a daemon behind a TLS proxy).
 */
export function parseEndpoint(url: string): Endpoint {
  const bad = (why: string) =>
    new HutchError(`invalid hutch URL ${JSON.stringify(url)}: ${why}`, { code: 'invalid_url' });
  if (url.startsWith('unix://')) {
    const socketPath = url.slice('unix://'.length);
    if (!socketPath.startsWith('/')) {
      throw bad('a Unix socket URL needs an absolute path, e.g. unix:///run/hutch/hutch.sock');
    }
    return { kind: 'unix', url, socketPath };
  }
  if (url.startsWith('/')) return { kind: 'unix', url: `unix://${url}`, socketPath: url };
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw bad('use unix:///PATH or http://HOST:PORT');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw bad('use unix:///PATH or http://HOST:PORT');
  if (u.pathname !== '/' || u.search || u.hash) throw bad('the URL takes no path, e.g. http://127.0.0.1:7070');
  if (u.username || u.password) throw bad('send credentials as an API key (apiKey or HUTCH_API_KEY)');
  const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  return { kind: 'tcp', url: `${u.protocol}//${u.host}`, protocol: u.protocol, host, port };
}
