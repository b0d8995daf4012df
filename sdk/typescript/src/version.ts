/** The SDK's version: the same as the hutch daemon's workspace version it was written against. */
export const VERSION = '0.1.0';
