// read_client.mjs -- drive the real @huggingface/hub client against a khub
// server and print TAP ("ok N - desc" lines, plan at the end).
//
// Environment:
//   KHUB_URL          base URL of the server (http://127.0.0.1:PORT)
//   REPO              kernel repo id, e.g. acme/relu
//   REV               revision to read (default: main)
//   SRC_DIR           local directory holding exactly the files imported at REV
//   LFS_RE            regex (on the path) of files expected as LFS (default: \.(so|bin)$)
//   PRIVATE_REPO      optional: a private kernel repo id
//   TOKEN             optional: an hf_ token with read access to PRIVATE_REPO
//   PRIVATE_SRC_DIR   optional: the directory imported into PRIVATE_REPO
//   TREE_PAGE_SIZE    optional: the server's --tree-page-size; then the
//                     recursive listing must have been paginated
//   ALLOWED_EXTRA     optional: comma-separated repo paths that may exist on
//                     the server without being in SRC_DIR (default: .gitattributes)
//
// Exit status: 0 when every test passed, 1 otherwise.
import { bailOut, collect, diag, dirsOf, done, gitBlobSha1, lfsPointer, ok, sha256, test, walk } from "./tap.mjs";
import { downloadFile, fileDownloadInfo, listFiles } from "@huggingface/hub";

const KHUB_URL = (process.env.KHUB_URL || "").replace(/\/+$/, "");
const REPO = process.env.REPO || "";
const REV = process.env.REV || "main";
const SRC_DIR = process.env.SRC_DIR || "";
const LFS_RE = new RegExp(process.env.LFS_RE || "\\.(so|bin)$");
const PRIVATE_REPO = process.env.PRIVATE_REPO || "";
const TOKEN = process.env.TOKEN || "";
const PRIVATE_SRC_DIR = process.env.PRIVATE_SRC_DIR || "";
const TREE_PAGE_SIZE = parseInt(process.env.TREE_PAGE_SIZE || "0", 10);
const ALLOWED_EXTRA = new Set((process.env.ALLOWED_EXTRA ?? ".gitattributes").split(",").filter(Boolean));

const normEtag = (e) => (e || "").replace(/^W\//, "").replace(/^"|"$/g, "");
const expectLfs = (rel) => LFS_RE.test(rel);

async function blobBytes(blob) {
	return Buffer.from(await blob.arrayBuffer());
}

async function main() {
	if (!KHUB_URL || !REPO || !SRC_DIR) {
		console.log("Bail out! KHUB_URL, REPO and SRC_DIR must be set");
		process.exit(2);
	}
	const repo = { type: "kernel", name: REPO };
	const common = { repo, hubUrl: KHUB_URL, revision: REV };
	const local = walk(SRC_DIR, expectLfs);
	const localDirs = dirsOf(local.keys());
	diag(`${REPO}@${REV}: ${local.size} local files, ${[...local.values()].filter((f) => f.lfs).length} LFS`);

	// ---- listFiles recursive -------------------------------------------------
	let entries = [];
	const pages = [];
	// Count the pages the client fetched (it follows Link rel="next" itself).
	const countingFetch = async (url, init) => {
		const res = await fetch(url, init);
		pages.push({ url: String(url), status: res.status, link: res.headers.get("Link") });
		return res;
	};
	await test(`listFiles(recursive) ${REPO}@${REV} answers`, async () => {
		entries = await collect(listFiles({ ...common, recursive: true, fetch: countingFetch }));
		return entries.length ? [] : ["no entries"];
	});
	diag(`listFiles(recursive): ${entries.length} entries in ${pages.length} page(s)`);
	if (TREE_PAGE_SIZE > 0) {
		const want = Math.max(1, Math.ceil(entries.length / TREE_PAGE_SIZE));
		ok(
			pages.length === want,
			`listFiles(recursive) followed Link pages (${entries.length} entries, page size ${TREE_PAGE_SIZE})`,
			[`fetched ${pages.length} page(s), want ${want}`, ...pages.map((p) => `${p.status} ${p.url} Link: ${p.link}`)],
		);
	}
	const byPath = new Map();
	const dups = [];
	for (const e of entries) {
		if (byPath.has(e.path)) dups.push(e.path);
		byPath.set(e.path, e);
	}
	ok(dups.length === 0, "listFiles(recursive): no path listed twice (pagination)", dups.map((d) => `duplicate ${d}`));

	for (const [path, f] of local) {
		const e = byPath.get(path);
		const problems = [];
		if (!e) {
			ok(false, `listFiles: ${path} listed`, ["missing from the listing"]);
			continue;
		}
		if (e.type !== "file") problems.push(`type ${e.type}, want file`);
		if (e.size !== f.size) problems.push(`size ${e.size}, want ${f.size}`);
		if ("xetHash" in e) problems.push("xetHash present (server does not speak Xet)");
		if (f.lfs) {
			const oid = sha256(f.bytes);
			const ptr = Buffer.from(lfsPointer(oid, f.size));
			if (!e.lfs) problems.push("no lfs object");
			else {
				if (e.lfs.oid !== oid) problems.push(`lfs.oid ${e.lfs.oid}, want ${oid}`);
				if (e.lfs.size !== f.size) problems.push(`lfs.size ${e.lfs.size}, want ${f.size}`);
				if (!Number.isInteger(e.lfs.pointerSize) || e.lfs.pointerSize <= 0)
					problems.push(`lfs.pointerSize ${e.lfs.pointerSize} is not a positive integer`);
				else if (e.lfs.pointerSize !== ptr.length)
					problems.push(`lfs.pointerSize ${e.lfs.pointerSize}, canonical pointer is ${ptr.length}`);
			}
			if (e.oid !== gitBlobSha1(ptr)) problems.push(`oid ${e.oid}, want git sha1 of the pointer ${gitBlobSha1(ptr)}`);
			ok(problems.length === 0, `listFiles: LFS ${path} (size, lfs.oid=sha256, pointerSize, oid)`, problems);
		} else {
			if (e.lfs) problems.push(`unexpected lfs ${JSON.stringify(e.lfs)}`);
			const want = gitBlobSha1(f.bytes);
			if (e.oid !== want) problems.push(`oid ${e.oid}, want ${want}`);
			ok(problems.length === 0, `listFiles: ${path} (size, oid=git blob sha1)`, problems);
		}
	}
	{
		const problems = [];
		for (const d of localDirs) {
			const e = byPath.get(d);
			if (!e) problems.push(`directory ${d} missing`);
			else if (e.type !== "directory") problems.push(`${d}: type ${e.type}, want directory`);
			else if (!/^[0-9a-f]{40}$/.test(e.oid || "")) problems.push(`${d}: oid '${e.oid}' is not a 40-hex tree sha`);
		}
		ok(problems.length === 0, `listFiles: all ${localDirs.size} directories listed as type directory`, problems);
	}
	{
		const extra = [...byPath.keys()].filter((p) => !local.has(p) && !localDirs.has(p) && !ALLOWED_EXTRA.has(p));
		ok(extra.length === 0, "listFiles: nothing listed that was not imported", extra.map((p) => `extra ${p}`));
	}

	// ---- listFiles non-recursive on build --------------------------------------
	await test("listFiles(path=build, non-recursive): exactly the variant directories", async () => {
		const got = await collect(listFiles({ ...common, path: "build", recursive: false }));
		const want = new Set([...localDirs, ...local.keys()].filter((p) => /^build\/[^/]+$/.test(p)));
		const problems = [];
		const seen = new Set();
		for (const e of got) {
			seen.add(e.path);
			if (!want.has(e.path)) problems.push(`unexpected ${e.type} ${e.path}`);
			else if (localDirs.has(e.path) && e.type !== "directory") problems.push(`${e.path}: type ${e.type}`);
		}
		for (const p of want) if (!seen.has(p)) problems.push(`missing ${p}`);
		if (got.length !== seen.size) problems.push(`${got.length} entries for ${seen.size} paths`);
		return problems;
	});
	{
		// one level deeper: a variant with files and a sub-directory
		const variant = [...localDirs]
			.filter((d) => /^build\/[^/]+$/.test(d))
			.find((d) => [...localDirs].some((x) => x.startsWith(`${d}/`)));
		if (variant) {
			await test(`listFiles(path=${variant}, non-recursive): direct children only`, async () => {
				const got = await collect(listFiles({ ...common, path: variant, recursive: false }));
				const depth = variant.split("/").length + 1;
				const want = new Set(
					[...localDirs, ...local.keys()].filter(
						(p) => p.startsWith(`${variant}/`) && p.split("/").length === depth,
					),
				);
				const problems = [];
				const seen = new Set(got.map((e) => e.path));
				for (const e of got) {
					if (!want.has(e.path)) problems.push(`unexpected ${e.path}`);
					else if (e.type !== (localDirs.has(e.path) ? "directory" : "file"))
						problems.push(`${e.path}: type ${e.type}`);
					else if (e.type === "file" && e.size !== local.get(e.path).size) problems.push(`${e.path}: size ${e.size}`);
				}
				for (const p of want) if (!seen.has(p)) problems.push(`missing ${p}`);
				return problems;
			});
		}
	}
	await test("listFiles on a missing path throws 404", async () => {
		try {
			await collect(listFiles({ ...common, path: "build/no-such-dir", recursive: false }));
			return ["did not throw"];
		} catch (e) {
			return e.statusCode === 404 ? [] : [`status ${e.statusCode}: ${e.message}`];
		}
	});

	// ---- downloadFile / fileDownloadInfo ---------------------------------------
	const regular = [...local.keys()].filter((p) => !local.get(p).lfs).sort((a, b) => b.split("/").length - a.split("/").length)[0];
	const lfsFile = [...local.keys()].filter((p) => local.get(p).lfs).sort((a, b) => local.get(b).size - local.get(a).size)[0];
	for (const [kind, path] of [
		["regular", regular],
		["LFS", lfsFile],
	]) {
		if (!path) {
			ok(false, `a local ${kind} file to download`, [`SRC_DIR has no ${kind} file`]);
			continue;
		}
		const f = local.get(path);
		await test(`downloadFile ${kind} ${path}: byte-identical`, async () => {
			const blob = await downloadFile({ ...common, path });
			if (!blob) return ["returned null"];
			const got = await blobBytes(blob);
			const problems = [];
			if (got.length !== f.size) problems.push(`got ${got.length} bytes, want ${f.size}`);
			if (sha256(got) !== sha256(f.bytes)) problems.push(`sha256 ${sha256(got)}, want ${sha256(f.bytes)}`);
			return problems;
		});
		await test(`fileDownloadInfo ${kind} ${path}: size and etag`, async () => {
			const info = await fileDownloadInfo({ ...common, path });
			if (!info) return ["returned null"];
			const problems = [];
			if (info.size !== f.size) problems.push(`size ${info.size}, want ${f.size}`);
			const want = f.lfs ? sha256(f.bytes) : gitBlobSha1(f.bytes);
			if (normEtag(info.etag) !== want) problems.push(`etag ${info.etag}, want "${want}"`);
			if (info.xet) problems.push("xet info present");
			return problems;
		});
	}
	await test("fileDownloadInfo of a missing file is null", async () => {
		const info = await fileDownloadInfo({ ...common, path: "build/no-such-file.py" });
		return info === null ? [] : [`got ${JSON.stringify(info)}`];
	});
	await test("downloadFile of a missing file is null", async () => {
		const blob = await downloadFile({ ...common, path: "no/such/file.bin" });
		return blob === null ? [] : [`got a blob of ${blob.size} bytes`];
	});

	// ---- private repo with an access token --------------------------------------
	if (PRIVATE_REPO && TOKEN) {
		const prepo = { type: "kernel", name: PRIVATE_REPO };
		const pcommon = { repo: prepo, hubUrl: KHUB_URL, revision: "main" };
		const plocal = PRIVATE_SRC_DIR ? walk(PRIVATE_SRC_DIR, expectLfs) : null;
		await test(`private ${PRIVATE_REPO}: listFiles with accessToken lists the files`, async () => {
			const got = await collect(listFiles({ ...pcommon, recursive: true, accessToken: TOKEN }));
			const files = new Map(got.filter((e) => e.type === "file").map((e) => [e.path, e]));
			if (!plocal) return files.size ? [] : ["no files"];
			const problems = [];
			for (const [p, f] of plocal) {
				if (!files.has(p)) problems.push(`missing ${p}`);
				else if (files.get(p).size !== f.size) problems.push(`${p}: size ${files.get(p).size}, want ${f.size}`);
			}
			return problems;
		});
		await test(`private ${PRIVATE_REPO}: listFiles without a token throws`, async () => {
			try {
				const got = await collect(listFiles({ ...pcommon, recursive: true }));
				return [`listed ${got.length} entries anonymously`];
			} catch (e) {
				return [401, 403, 404].includes(e.statusCode) ? [] : [`status ${e.statusCode}: ${e.message}`];
			}
		});
		await test(`private ${PRIVATE_REPO}: listFiles with a wrong token throws`, async () => {
			const bad = "hf_" + "x".repeat(34);
			try {
				const got = await collect(listFiles({ ...pcommon, recursive: true, accessToken: bad }));
				return [`listed ${got.length} entries with a bogus token`];
			} catch (e) {
				return [401, 403, 404].includes(e.statusCode) ? [] : [`status ${e.statusCode}: ${e.message}`];
			}
		});
		const plfs = plocal ? [...plocal.keys()].find((p) => plocal.get(p).lfs) : null;
		if (plfs) {
			await test(`private ${PRIVATE_REPO}: downloadFile LFS ${plfs} with accessToken`, async () => {
				const blob = await downloadFile({ ...pcommon, path: plfs, accessToken: TOKEN });
				if (!blob) return ["returned null"];
				const got = await blobBytes(blob);
				const want = sha256(plocal.get(plfs).bytes);
				return sha256(got) === want ? [] : [`sha256 ${sha256(got)} (${got.length} bytes), want ${want}`];
			});
			await test(`private ${PRIVATE_REPO}: fileDownloadInfo without a token throws (not null)`, async () => {
				try {
					const info = await fileDownloadInfo({ ...pcommon, path: plfs });
					return [`got ${JSON.stringify(info)}`];
				} catch (e) {
					return [401, 403, 404].includes(e.statusCode) ? [] : [`status ${e.statusCode}: ${e.message}`];
				}
			});
		}
	}

	done();
}

main().catch(bailOut);
