// The connection to one daemon, and the admin operations that are not about one sandbox.
import {
  type Key,
  type PoolInfo,
  type PoolTemplate,
  type Reuse,
  type VersionInfo,
  templateToWire,
} from './models.js';
import { Transport } from './transport.js';

export interface HutchOptions {
  /**
   * `unix:///path/to.sock` or `http://host:port`; default `$HUTCH_URL`, else
   * `unix:///run/hutch/hutch.sock`
   */
  url?: string;
  /** an API key (`hutch_...`), sent as `Authorization: Bearer`; default `$HUTCH_API_KEY` (not needed on the socket) */
  apiKey?: string;
  /** how long to wait for the daemon's answer, on top of a command's own time limit (default 60000) */
  timeoutMs?: number;
  /** retries where they are safe (default 2) */
  maxRetries?: number;
}

/** A connection to a hutch daemon (`hutch serve`). Cheap to create, safe to share. */
export class Hutch {
  readonly transport: Transport;
  /** warm pools (managing them is for admins) */
  readonly pools: Pools;
  /** API keys (admins only) */
  readonly keys: Keys;

  constructor(options: HutchOptions = {}) {
    this.transport = new Transport(options);
    this.pools = new Pools(this.transport);
    this.keys = new Keys(this.transport);
  }

  /** The daemon's URL (`unix:///...` or `http://...`). */
  get url(): string {
    return this.transport.url;
  }

  /** Resolves when the daemon answers its health check. */
  async health(): Promise<{ status: string }> {
    return this.transport.call('health');
  }

  /** The daemon's version and which backends can run on its host. */
  async version(): Promise<VersionInfo> {
    return this.transport.call('version');
  }

  /** Closes idle connections (they do not keep the process alive anyway). */
  close(): void {
    this.transport.close();
  }
}

let defaultClient: { key: string; client: Hutch } | undefined;

/** The client for `$HUTCH_URL` / `$HUTCH_API_KEY`, made once and reused while they stay the same. */
export function defaultHutch(): Hutch {
  const key = `${process.env.HUTCH_URL ?? ''}\n${process.env.HUTCH_API_KEY ?? ''}`;
  if (defaultClient?.key !== key) defaultClient = { key, client: new Hutch() };
  return defaultClient.client;
}

export interface PoolCreateOptions {
  /** `[A-Za-z0-9_-]{1,64}` */
  name: string;
  /** warm sandboxes to keep ready */
  size: number;
  /** sandboxes of this pool (warm and in use) at most; not smaller than `size` */
  max?: number | null;
  /** `fresh` (default): a returned member is destroyed; `recycle`: wiped and put back warm */
  reuse?: Reuse;
  /** the members' shape: backend, runtime, image, limits, env, contexts */
  template?: PoolTemplate;
}

/** Warm pools: sandboxes of one shape kept started. Take one with `Sandbox.create({ pool })`. */
export class Pools {
  constructor(private readonly transport: Transport) {}

  /** Defines a pool and starts filling it (admin only). */
  async create(options: PoolCreateOptions): Promise<PoolInfo> {
    return this.transport.call('pools.create', {
      name: options.name,
      size: options.size,
      max: options.max,
      reuse: options.reuse,
      template: templateToWire(options.template),
    });
  }

  /** Every pool with its members per state and its hit/miss counts. */
  async list(): Promise<PoolInfo[]> {
    return this.transport.call('pools.list');
  }

  /** One pool. */
  async get(name: string): Promise<PoolInfo> {
    return this.transport.call('pools.get', { name });
  }

  /** Deletes a pool and its warm members; members in use stay with their users (admin only). */
  async delete(name: string): Promise<void> {
    await this.transport.call('pools.delete', { name });
  }
}

export interface KeyCreateOptions {
  name: string;
  /** may manage keys and pools, use the process backend and rootfs, and see every sandbox */
  admin?: boolean;
  /** live sandboxes this key may own at once (null: no limit) */
  maxSandboxes?: number | null;
  /** requests per minute (null: no limit) */
  ratePerMinute?: number | null;
}

/** API keys for the daemon's TCP listener (admin only). */
export class Keys {
  constructor(private readonly transport: Transport) {}

  /** Creates a key; its `secret` is in this answer only. */
  async create(options: KeyCreateOptions): Promise<Key> {
    return this.transport.call('keys.create', {
      name: options.name,
      admin: options.admin,
      max_sandboxes: options.maxSandboxes,
      rate_per_minute: options.ratePerMinute,
    });
  }

  /** Every key, revoked ones included (never the secrets). */
  async list(): Promise<Key[]> {
    return this.transport.call('keys.list');
  }

  /** Revokes a key by its id (`key_...`, not the secret). */
  async revoke(id: string): Promise<void> {
    await this.transport.call('keys.revoke', { id });
  }
}
