// The little of Node the test scripts use (no @types/node here).
declare const process: {
  env: Record<string, string | undefined>;
  exitCode: number | undefined;
};
declare module "node:fs" {
  export function readFileSync(path: string, encoding: "utf8"): string;
}
