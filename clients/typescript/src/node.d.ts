// The little of node:crypto this client uses, so that it compiles without
// @types/node (the package has no dependencies, not even for types).
declare module "node:crypto" {
  interface Hash {
    update(data: string | Uint8Array): Hash;
    digest(encoding: "hex" | "base64"): string;
  }
  export function createHmac(algorithm: "sha256", key: Uint8Array): Hash;
  export function createHash(algorithm: "sha256"): Hash;
  export function randomUUID(): string;
  export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean;
}
