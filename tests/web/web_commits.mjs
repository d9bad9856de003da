// web_commits.mjs -- the commit history and the commit page (with its diff)
// in Debian's chromium (headless), driven by playwright-core, against a real
// khub started by tests/integration/t0254-web-commits.sh. A series of commits
// is pushed through the API's commit endpoint and git: a text change, a
// file holding HTML and script, an LFS file changed, a plain binary file, a
// deleted file, a change over the page's line limit; the root commit is the
// repo's first. TAP out; screenshots under $ARTIFACTS; the commits' shas
// are written to $SHAS_JSON for the shell's access checks.
import { chromium } from "playwright-core";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { ok, test, done, bailOut, sha256 } from "../js/tap.mjs";

const URL_ = process.env.KHUB_URL;
const ROOT = process.env.ROOT_TOKEN, ALICE = process.env.ALICE_TOKEN;
const ARTIFACTS = process.env.ARTIFACTS || "tests/web/artifacts";
mkdirSync(ARTIFACTS, { recursive: true });

async function must(method, path, { token = ROOT, json, body, type } = {}) {
	const headers = { Authorization: `Bearer ${token}` };
	if (json !== undefined) {
		headers["Content-Type"] = "application/json";
		body = JSON.stringify(json);
	} else if (type) headers["Content-Type"] = type;
	const res = await fetch(`${URL_}${path}`, { method, headers, body });
	const text = await res.text();
	if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
	try { return JSON.parse(text); } catch { return text; }
}
// One commit through the API: files (path -> string or Buffer), deleted paths.
async function commit(repo, summary, description, files, deleted = []) {
	const lines = [JSON.stringify({ key: "header", value: { summary, description } })];
	for (const [path, content] of Object.entries(files))
		lines.push(JSON.stringify({ key: "file", value: { path, content: Buffer.from(content).toString("base64"),
			encoding: "base64" } }));
	for (const path of deleted) lines.push(JSON.stringify({ key: "deletedFile", value: { path } }));
	const r = await must("POST", `/api/kernels/${repo}/commit/main`, { body: lines.join("\n") + "\n",
		type: "application/x-ndjson" });
	return r.commitOid;
}
// Random bytes with a NUL in front: binary (the API stores them as LFS).
const binary = (n) => Buffer.concat([Buffer.from([0]), randomBytes(n - 1)]);

const RELU1 = ["import torch", "", "def relu(x):", "    # clamp at zero", "    return x.clamp(min=0)", "",
	"def relu_(x):", "    return x.clamp_(min=0)", "", "__all__ = ['relu']"];
const RELU2 = [...RELU1.slice(0, 4), "    return torch.clamp(x, min=0)", ...RELU1.slice(5, 8), "    # in place",
	...RELU1.slice(8)];
const HOSTILE = ["<script>window.__pwned=1</script>", "<img src=x onerror=\"window.__pwned=2\">",
	"a long line " + "0123456789".repeat(30), ""].join("\n");
const BODY = "Clamp with torch.clamp.\n\nThe in-place variant gets a comment.";
const W1 = binary(4000), W2 = binary(5000);
const T1 = binary(300), T2 = binary(310);
const BIG = Array.from({ length: 6000 }, (_, i) => `line ${i + 1}`).join("\n") + "\n";

const SHA = {};
async function publish() {
	await must("POST", "/api/repos/create", { json: { name: "diffs", organization: "acme", type: "kernel" } });
	const log0 = await must("GET", "/api/kernels/acme/diffs/commits/main");
	SHA.root = log0[log0.length - 1].id;
	SHA.add = await commit("acme/diffs", "add sources", "", { "src/relu.py": RELU1.join("\n") + "\n",
		"weights.bin": W1, "notes.txt": "one\ntwo\nthree\n" });
	SHA.text = await commit("acme/diffs", "tweak relu", BODY, { "src/relu.py": RELU2.join("\n") + "\n" });
	SHA.hostile = await commit("acme/diffs", "add page.html", "", { "page.html": HOSTILE });
	SHA.lfs = await commit("acme/diffs", "new weights", "", { "weights.bin": W2 });
	// a plain (not LFS) binary file: only a git push brings one
	const dir = mkdtempSync(join(tmpdir(), "khub-commits-"));
	const remote = `${URL_.replace("://", `://root:${ROOT}@`)}/kernels/acme/diffs`;
	const git = (...args) => execFileSync("git", ["-c", "user.name=Git Pusher", "-c", "user.email=git@example.com",
		...args], { cwd: dir, env: { ...process.env, GIT_LFS_SKIP_SMUDGE: "1" }, stdio: "pipe" }).toString().trim();
	git("clone", "-q", remote, ".");
	writeFileSync(join(dir, "table.dat"), T1);
	git("add", "table.dat");
	git("commit", "-q", "-m", "add table.dat");
	SHA.binAdd = git("rev-parse", "HEAD");
	writeFileSync(join(dir, "table.dat"), T2);
	git("commit", "-q", "-am", "change table.dat");
	SHA.bin = git("rev-parse", "HEAD");
	git("push", "-q", "origin", "HEAD:main");
	SHA.del = await commit("acme/diffs", "remove notes", "", {}, ["notes.txt"]);
	SHA.big = await commit("acme/diffs", "a big file", "", { "big.txt": BIG });
	await must("POST", "/api/repos/create", { json: { name: "hidden", organization: "acme", type: "kernel", private: true } });
	SHA.hidden = await commit("acme/hidden", "secret change", "", { "secret.txt": "s3cret\n" });
	writeFileSync(process.env.SHAS_JSON, JSON.stringify(SHA));
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
const shot = (page, name) => page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: false });
const commitPath = (sha, repo = "acme/diffs") => `/kernels/${repo}/commit/${sha}`;

// The diff as the page shows it: per file section its status, path, counts,
// notes and rows (class, old and new line number, text without the sign).
function readDiff(page) {
	return page.$$eval("section.diff-file", (secs) => secs.map((s) => ({
		status: s.dataset.status,
		path: s.querySelector(".path").textContent,
		stat: s.querySelector(".diff-stat")?.textContent ?? "",
		notes: [...s.querySelectorAll(".diff-note")].map((n) => n.textContent),
		rows: [...s.querySelectorAll("table.diff tr:not(.hunk)")].map((tr) => [tr.className,
			tr.querySelector(".ln.old").textContent, tr.querySelector(".ln.new").textContent,
			tr.querySelector(".code").textContent.slice(1)]),
		hunks: [...s.querySelectorAll("tr.hunk")].map((tr) => tr.textContent),
	})));
}
const same = (got, want, what) => JSON.stringify(got) === JSON.stringify(want) ? [] :
	[`${what}: got ${JSON.stringify(got)}`, `want ${JSON.stringify(want)}`];

try {
	await publish();
	ok(true, "published a series of commits through the API and git");
} catch (e) {
	bailOut(e);
}
const ctx = await browser.newContext({ baseURL: URL_, viewport: { width: 1366, height: 900 } });
const page = await ctx.newPage();
const errors = [];
page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));

await test("history: every row has date and time (<time datetime> = the API's date), author, title link, short sha, browse files", async () => {
	const api = await must("GET", "/api/kernels/acme/diffs/commits/main");
	const res = await page.goto("/kernels/acme/diffs/commits/main");
	const rows = await page.$$eval("#commits li.commit-row", (lis) => lis.map((li) => ({
		title: li.querySelector("a.commit-title").textContent, href: li.querySelector("a.commit-title").getAttribute("href"),
		datetime: li.querySelector("time").getAttribute("datetime"), time: li.querySelector("time").textContent,
		author: li.querySelector(".muted").textContent, sha: li.querySelector("a.sha").textContent,
		browse: li.querySelector("a.browse").getAttribute("href"), body: li.querySelector("details pre")?.textContent ?? null })));
	await shot(page, "commits-history-1366");
	const p = [];
	if (res.status() !== 200) p.push(`status ${res.status()}`);
	if (rows.length !== api.length) p.push(`${rows.length} rows, the API lists ${api.length}`);
	api.forEach((c, i) => {
		const r = rows[i] || {};
		if (r.title !== c.title) p.push(`row ${i}: title ${r.title}, want ${c.title}`);
		if (r.href !== commitPath(c.id)) p.push(`row ${i}: title links ${r.href}`);
		if (r.datetime !== c.date) p.push(`row ${i}: datetime ${r.datetime}, want ${c.date}`);
		if (r.time !== `${c.date.slice(0, 10)} ${c.date.slice(11, 16)} UTC`) p.push(`row ${i}: shows ${r.time}`);
		if (!r.author?.includes(c.authors[0].user)) p.push(`row ${i}: author ${r.author}`);
		if (r.sha !== c.id.slice(0, 10)) p.push(`row ${i}: sha ${r.sha}`);
		if (r.browse !== `/kernels/acme/diffs/tree/${c.id}`) p.push(`row ${i}: browse ${r.browse}`);
		if (r.body !== (c.message ? c.message : null)) p.push(`row ${i}: body ${JSON.stringify(r.body)}, want ${c.message}`);
	});
	const text = rows.find((r) => r.title === "tweak relu");
	if (text?.body !== BODY) p.push(`the body of "tweak relu" is ${JSON.stringify(text?.body)}`);
	return p;
});

await test("history: the title opens the commit page; \"browse files\" opens the tree at that sha", async () => {
	await page.goto("/kernels/acme/diffs/commits/main");
	await Promise.all([page.waitForURL(`**${commitPath(SHA.text)}`), page.click("a.commit-title:text-is('tweak relu')")]);
	const p = [];
	if ((await page.textContent("#commit-title")) !== "tweak relu") p.push("the commit page's title");
	if ((await page.textContent("#commit-sha")) !== SHA.text) p.push("the commit page's sha");
	await page.goto("/kernels/acme/diffs/commits/main");
	await Promise.all([page.waitForURL(`**/kernels/acme/diffs/tree/${SHA.text}`),
		page.click(`a.browse[aria-label='Browse files at ${SHA.text.slice(0, 10)}']`)]);
	const files = await page.$$eval("#files th a", (as) => as.map((a) => a.textContent));
	if (!(await page.textContent("main")).includes(SHA.text)) p.push("the tree page does not name the sha");
	if (!files.includes("src/") || files.includes("page.html")) p.push(`the tree at that sha lists ${files}`);
	return p;
});

await test("commit page: a text change, exact lines and line numbers, body, author, time, parent, browse link", async () => {
	const res = await page.goto(commitPath(SHA.text));
	await shot(page, "commit-text-1366");
	const d = await readDiff(page);
	const p = [];
	if (res.status() !== 200) p.push(`status ${res.status()}`);
	p.push(...same(d.map((f) => [f.status, f.path, f.stat]), [["modified", "src/relu.py", "+2 −1"]], "files"));
	const changed = d[0]?.rows.filter((r) => r[0] !== "ctx");
	p.push(...same(changed, [["del", "5", "", "    return x.clamp(min=0)"], ["add", "", "5", "    return torch.clamp(x, min=0)"],
		["add", "", "9", "    # in place"]], "changed lines"));
	p.push(...same(d[0]?.rows[0], ["ctx", "2", "2", ""], "first context line"));
	p.push(...same(d[0]?.hunks, ["@@ -2,9 +2,10 @@"], "hunks"));
	if ((await page.textContent("#commit-body")) !== BODY) p.push("the body");
	if ((await page.textContent("#diff-summary")) !== "1 file changed, +2 −1") p.push("the summary");
	if (!(await page.textContent("#commit-meta")).includes("root")) p.push("the author");
	const parent = await page.getAttribute("#commit-parents a", "href");
	if (parent !== commitPath(SHA.add)) p.push(`parent link ${parent}`);
	if ((await page.getAttribute("#browse-files", "href")) !== `/kernels/acme/diffs/tree/${SHA.text}`) p.push("browse link");
	if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/.test(await page.getAttribute("#commit-meta time", "datetime")))
		p.push("no <time datetime>");
	await Promise.all([page.waitForURL(`**${commitPath(SHA.add)}`), page.click("#commit-parents a")]);
	if ((await page.textContent("#commit-title")) !== "add sources") p.push("the parent link does not open the parent");
	return p;
});

await test("commit page: HTML and script in a diff are shown as text, never run", async () => {
	await page.goto(commitPath(SHA.hostile));
	const d = await readDiff(page);
	const p = same(d[0]?.rows.slice(0, 2), [["add", "", "1", "<script>window.__pwned=1</script>"],
		["add", "", "2", "<img src=x onerror=\"window.__pwned=2\">"]], "lines");
	if (await page.evaluate(() => window.__pwned !== undefined)) p.push("window.__pwned is set");
	if (await page.$("main script, main img")) p.push("the diff made a script or img element");
	if (!(await page.content()).includes("&lt;script&gt;window.__pwned=1&lt;/script&gt;")) p.push("not escaped in the HTML");
	return p;
});

await test("commit page: an LFS file changed shows its size change and oids, not the pointer text", async () => {
	await page.goto(commitPath(SHA.lfs));
	await shot(page, "commit-lfs-1366");
	const d = await readDiff(page);
	const html = await page.content();
	const p = same(d.map((f) => [f.status, f.path, f.notes]), [["modified", "weights.bin",
		["LFS object 4.0 kB → 5.0 kB", `sha256:${sha256(W1)} → sha256:${sha256(W2)}`]]], "files");
	if (html.includes("git-lfs.github.com") || html.includes("oid sha256")) p.push("the pointer text is on the page");
	if ((await page.textContent("#diff-summary")) !== "1 file changed") p.push("the summary counts lines of an LFS file");
	await page.goto(commitPath(SHA.add));
	const added = (await readDiff(page)).find((f) => f.path === "weights.bin");
	p.push(...same(added?.notes, ["LFS object added, 4.0 kB", `sha256:${sha256(W1)}`], "the LFS file added"));
	return p;
});

await test("commit page: a binary file is a note with its sizes", async () => {
	await page.goto(commitPath(SHA.bin));
	const p = same((await readDiff(page)).map((f) => [f.status, f.path, f.notes, f.rows.length]),
		[["modified", "table.dat", ["binary file changed, 300 → 310 bytes"], 0]], "files");
	await page.goto(commitPath(SHA.binAdd));
	p.push(...same((await readDiff(page)).map((f) => f.notes), [["binary file added, 300 bytes"]], "added"));
	if (!(await page.textContent("#commit-meta")).includes("Git Pusher")) p.push("the pushed commit's author");
	return p;
});

await test("commit page: a deleted file shows its removed lines with old line numbers", async () => {
	await page.goto(commitPath(SHA.del));
	return same((await readDiff(page)).map((f) => [f.status, f.path, f.stat, f.rows]), [["deleted", "notes.txt", "+0 −3",
		[["del", "1", "", "one"], ["del", "2", "", "two"], ["del", "3", "", "three"]]]], "files");
});

await test("commit page: the root commit diffs against the empty tree; it has no parent", async () => {
	const res = await page.goto(commitPath(SHA.root));
	const d = await readDiff(page);
	const p = [];
	if (res.status() !== 200) p.push(`status ${res.status()}`);
	if (!d.length || d.some((f) => f.status !== "added")) p.push(`files ${JSON.stringify(d.map((f) => [f.status, f.path]))}`);
	for (const f of d)
		f.rows.forEach((r, i) => { if (r[0] !== "add" || r[1] !== "" || r[2] !== String(i + 1)) p.push(`${f.path} row ${i}: ${r}`); });
	if (!(await page.textContent("#commit-parents")).includes("none")) p.push("a parent is shown");
	return p;
});

await test("commit page: a change over the page's limit says how many lines were left out", async () => {
	await page.goto(commitPath(SHA.big));
	await shot(page, "commit-over-limit-1366");
	const d = await readDiff(page);
	const p = same(d.map((f) => [f.path, f.stat, f.rows.length, f.notes]), [["big.txt", "+6000 −0", 5000,
		["1000 more lines of this file not shown"]]], "files");
	const notice = await page.textContent("#diff-left-out");
	if (!notice?.includes("1000 lines")) p.push(`the notice: ${notice}`);
	return p;
});

await test("a non-hex, unknown or non-commit sha is a 404 page", async () => {
	const p = [];
	for (const rev of ["main", "zzzzzzz", "0000000000000000000000000000000000000000", "abc"]) {
		const res = await page.goto(commitPath(rev));
		if (res.status() !== 404) p.push(`${rev}: ${res.status()}`);
	}
	const res = await page.goto(commitPath(SHA.text.slice(0, 12)));
	if (res.status() !== 200 || (await page.textContent("#commit-sha")) !== SHA.text) p.push("an abbreviated sha does not open");
	return p;
});

await test("390 px: the diff scrolls inside its own box (tabindex=0, aria-label), the page does not", async () => {
	const small = await browser.newPage({ viewport: { width: 390, height: 844 } });
	await small.goto(`${URL_}${commitPath(SHA.hostile)}`);
	await shot(small, "commit-hostile-390");
	const m = await small.evaluate(() => {
		const box = document.querySelector(".diff-scroll");
		return { page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
			box: box.scrollWidth - box.clientWidth, tabindex: box.getAttribute("tabindex"), label: box.getAttribute("aria-label") };
	});
	await small.goto(`${URL_}${commitPath(SHA.text)}`);
	await shot(small, "commit-text-390");
	const m2 = await small.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
	await small.goto(`${URL_}/kernels/acme/diffs/commits/main`);
	await shot(small, "commits-history-390");
	const m3 = await small.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
	await small.close();
	const p = [];
	if (m.page > 0 || m2 > 0 || m3 > 0) p.push(`the page scrolls sideways by ${m.page}, ${m2}, ${m3} px`);
	if (m.box <= 0) p.push("the diff box does not scroll (the long line is not in it)");
	if (m.tabindex !== "0" || m.label !== "Changes to page.html") p.push(`box tabindex ${m.tabindex}, label ${m.label}`);
	return p;
});

await test("a private repo's commit page opens for a member's session", async () => {
	const c = await browser.newContext({ baseURL: URL_ });
	const pg = await c.newPage();
	await pg.goto("/login");
	await pg.fill("#token", ALICE);
	await Promise.all([pg.waitForURL(/\/kernels$/), pg.click("form[action='/login'] button[type=submit]")]);
	const res = await pg.goto(commitPath(SHA.hidden, "acme/hidden"));
	const d = await readDiff(pg);
	await c.close();
	return [...(res.status() === 200 ? [] : [`status ${res.status()}`]),
		...same(d.map((f) => [f.path, f.rows]), [["secret.txt", [["add", "", "1", "s3cret"]]]], "files")];
});

ok(errors.length === 0, "no page error in the browser", errors);
await browser.close();
done();
