// tap.mjs -- what the JS client tests share: TAP output (numbered "ok N"
// lines, "# TODO" as an expected failure, the plan at the end) and the
// hashes the Hub's tree entries are made of.
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

let count = 0;
let failed = 0;

export function diag(msg) {
	for (const line of String(msg).split("\n")) console.log(`# ${line}`);
}

export function ok(cond, desc, problems = []) {
	count++;
	if (cond) {
		console.log(`ok ${count} - ${desc}`);
	} else {
		// a "# TODO" test is an expected failure (TAP): it does not fail the run
		if (!desc.includes("# TODO")) failed++;
		console.log(`not ok ${count} - ${desc}`);
		for (const p of problems) diag(`  ${p}`);
	}
}

// Run an async check that returns a list of problems ([] = pass); an
// exception is a failure with its message as diagnostic. True when passed.
export async function test(desc, fn) {
	try {
		const problems = (await fn()) || [];
		ok(problems.length === 0, desc, problems);
		return problems.length === 0;
	} catch (e) {
		ok(false, desc, [`threw: ${e && e.stack ? e.stack.split("\n").slice(0, 3).join(" | ") : e}`]);
		return false;
	}
}

// Print the plan and exit: 0 when every test passed (TODOs aside), 1 otherwise.
export function done() {
	console.log(`1..${count}`);
	process.exit(failed ? 1 : 0);
}

// An unexpected error outside any test.
export function bailOut(e) {
	console.log(`Bail out! ${e && e.stack ? e.stack.split("\n")[0] : e}`);
	process.exit(2);
}

export const sha256 = (buf) => createHash("sha256").update(buf).digest("hex");
export const gitBlobSha1 = (buf) =>
	createHash("sha1").update(Buffer.from(`blob ${buf.length}\0`, "latin1")).update(buf).digest("hex");
export const lfsPointer = (oid, size) => `version https://git-lfs.github.com/spec/v1\noid sha256:${oid}\nsize ${size}\n`;

// Local files under dir: repo path -> {full, bytes, size, lfs: isLfs(path, bytes)}.
export function walk(dir, isLfs, prefix = "", out = new Map()) {
	for (const name of readdirSync(dir).sort()) {
		if (name === ".git") continue;
		const full = join(dir, name);
		const rel = prefix ? `${prefix}/${name}` : name;
		const st = statSync(full);
		if (st.isDirectory()) walk(full, isLfs, rel, out);
		else if (st.isFile()) {
			const bytes = readFileSync(full);
			out.set(rel, { full, bytes, size: bytes.length, lfs: isLfs(rel, bytes) });
		}
	}
	return out;
}

// Every parent directory of the given paths.
export function dirsOf(paths) {
	const dirs = new Set();
	for (const p of paths) {
		const parts = p.split("/");
		for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
	}
	return dirs;
}

export async function collect(iter) {
	const out = [];
	for await (const e of iter) out.push(e);
	return out;
}
