// manage_client.mjs -- drive the real @huggingface/hub client's repo
// management calls against a khub server (createRepo, repoExists,
// createBranch, deleteBranch, listCommits, countCommits, deleteRepo) and
// print TAP ("ok N - desc" lines, plan at the end).
//
// Environment:
//   KHUB_URL   base URL of the server (http://127.0.0.1:PORT)
//   TOKEN      an hf_ token with write access to namespace NS
//   NS         the namespace to create repos in (an org the token's user writes to)
//
// Exit status: 0 when every test passed, 1 otherwise.
import {
	countCommits,
	createBranch,
	createRepo,
	deleteBranch,
	deleteRepo,
	downloadFile,
	listCommits,
	repoExists,
} from "@huggingface/hub";
import { done, ok, test } from "./tap.mjs";

const KHUB_URL = (process.env.KHUB_URL || "").replace(/\/+$/, "");
const TOKEN = process.env.TOKEN || "";
const NS = process.env.NS || "";

// The call must throw an HTTP error with this status.
async function rejects(fn, status) {
	try {
		await fn();
	} catch (e) {
		if (e && e.statusCode === status) return [];
		return [`threw ${e && e.statusCode ? `status ${e.statusCode}` : e}, want status ${status}`];
	}
	return [`did not throw, want status ${status}`];
}

async function refs(name) {
	const res = await fetch(`${KHUB_URL}/api/kernels/${name}/refs`, {
		headers: { Authorization: `Bearer ${TOKEN}` },
	});
	if (!res.ok) throw new Error(`refs ${name}: ${res.status}`);
	return res.json();
}

const branchSha = (r, b) => (r.branches.find((x) => x.name === b) || {}).targetCommit;
const hub = { hubUrl: KHUB_URL };
const pub = `${NS}/js-public`;
const priv = `${NS}/js-private`;
const withFiles = `${NS}/js-files`;
const kernel = (name) => ({ type: "kernel", name });

await test("createRepo (public kernel) answers the repo url and id", async () => {
	const r = await createRepo({ ...hub, accessToken: TOKEN, repo: kernel(pub) });
	const problems = [];
	if (r.repoUrl !== `${KHUB_URL}/kernels/${pub}`) problems.push(`repoUrl ${r.repoUrl}`);
	if (r.id !== pub) problems.push(`id ${r.id}`);
	return problems;
});

await test("createRepo of an existing repo throws 409", () =>
	rejects(() => createRepo({ ...hub, accessToken: TOKEN, repo: kernel(pub) }), 409));

await test("createRepo (private: true) succeeds", async () => {
	const r = await createRepo({ ...hub, accessToken: TOKEN, repo: kernel(priv), private: true });
	return r.id === priv ? [] : [`id ${r.id}`];
});

await test("repoExists: public repo, anonymous", async () =>
	(await repoExists({ ...hub, repo: kernel(pub) })) ? [] : ["false"]);
await test("repoExists: private repo, anonymous, is false", async () =>
	(await repoExists({ ...hub, repo: kernel(priv) })) ? ["true"] : []);
await test("repoExists: private repo with the token", async () =>
	(await repoExists({ ...hub, repo: kernel(priv), accessToken: TOKEN })) ? [] : ["false"]);
await test("repoExists: missing repo is false", async () =>
	(await repoExists({ ...hub, repo: kernel(`${NS}/js-nope`), accessToken: TOKEN })) ? ["true"] : []);

await test("createRepo with files commits them at creation", async () => {
	const text = "*.html filter=lfs diff=lfs merge=lfs -text";
	await createRepo({
		...hub,
		accessToken: TOKEN,
		repo: kernel(withFiles),
		files: [{ path: ".gitattributes", content: new Blob([text]) }],
	});
	const blob = await downloadFile({ ...hub, accessToken: TOKEN, repo: kernel(withFiles), path: ".gitattributes" });
	const got = blob ? await blob.text() : null;
	return got === text ? [] : [`content ${JSON.stringify(got)}`];
});

await test("listCommits: one initial commit on a new repo", async () => {
	const commits = [];
	for await (const c of listCommits({ ...hub, accessToken: TOKEN, repo: kernel(pub) })) commits.push(c);
	const problems = [];
	if (commits.length !== 1) problems.push(`${commits.length} commits`);
	const c = commits[0] || {};
	if (c.title !== "initial commit") problems.push(`title ${JSON.stringify(c.title)}`);
	if (c.message !== "") problems.push(`message ${JSON.stringify(c.message)}`);
	if (!/^[0-9a-f]{40}$/.test(c.oid || "")) problems.push(`oid ${c.oid}`);
	if (!(c.date instanceof Date) || isNaN(c.date)) problems.push(`date ${c.date}`);
	if (!Array.isArray(c.authors) || typeof c.authors[0]?.username !== "string") problems.push("authors");
	return problems;
});

await test("countCommits reads X-Total-Count", async () => {
	const n = await countCommits({ ...hub, accessToken: TOKEN, repo: kernel(withFiles) });
	return n === 2 ? [] : [`count ${n}`];
});

await test("listCommits on a private repo with the token", async () => {
	let n = 0;
	for await (const _ of listCommits({ ...hub, accessToken: TOKEN, repo: kernel(priv) })) n++;
	return n === 1 ? [] : [`${n} commits`];
});

await test("listCommits on a private repo without a token throws 401", () =>
	rejects(async () => {
		for await (const _ of listCommits({ ...hub, repo: kernel(priv) }));
	}, 401));

await test("listCommits follows Link across pages (batchSize 1)", async () => {
	const all = [];
	for await (const c of listCommits({ ...hub, accessToken: TOKEN, repo: kernel(withFiles), batchSize: 1 }))
		all.push(c.title);
	return JSON.stringify(all) === JSON.stringify(["Add .gitattributes", "initial commit"])
		? []
		: [`titles ${JSON.stringify(all)}`];
});

await test("createBranch without a revision starts at main", async () => {
	await createBranch({ ...hub, accessToken: TOKEN, repo: kernel(pub), branch: "v1" });
	const r = await refs(pub);
	const v1 = branchSha(r, "v1");
	return v1 && v1 === branchSha(r, "main") ? [] : [`v1 ${v1} main ${branchSha(r, "main")}`];
});

await test("createBranch with a revision", async () => {
	await createBranch({ ...hub, accessToken: TOKEN, repo: kernel(pub), branch: "feature/x", revision: "v1" });
	const r = await refs(pub);
	return branchSha(r, "feature/x") === branchSha(r, "v1") ? [] : [`feature/x ${branchSha(r, "feature/x")}`];
});

await test("createBranch of an existing branch throws 409", () =>
	rejects(() => createBranch({ ...hub, accessToken: TOKEN, repo: kernel(pub), branch: "v1" }), 409));

await test("createBranch overwrite alone keeps an existing branch", async () => {
	await createBranch({ ...hub, accessToken: TOKEN, repo: kernel(pub), branch: "v1", overwrite: true });
	const r = await refs(pub);
	return branchSha(r, "v1") === branchSha(r, "main") ? [] : ["v1 moved"];
});

await test("createBranch empty: true makes a branch with an empty tree", async () => {
	await createBranch({ ...hub, accessToken: TOKEN, repo: kernel(pub), branch: "empty", empty: true });
	const res = await fetch(`${KHUB_URL}/api/kernels/${pub}/tree/empty`, {
		headers: { Authorization: `Bearer ${TOKEN}` },
	});
	const body = await res.json();
	return res.ok && Array.isArray(body) && body.length === 0 ? [] : [`tree ${res.status} ${JSON.stringify(body)}`];
});

await test("createBranch from a missing revision throws 404", () =>
	rejects(
		() => createBranch({ ...hub, accessToken: TOKEN, repo: kernel(pub), branch: "v9", revision: "nope" }),
		404,
	));

await test("createBranch without a token throws 401", () =>
	rejects(() => createBranch({ ...hub, repo: kernel(pub), branch: "anon" }), 401));

await test("deleteBranch removes the branch", async () => {
	await deleteBranch({ ...hub, accessToken: TOKEN, repo: kernel(pub), branch: "feature/x" });
	const r = await refs(pub);
	return branchSha(r, "feature/x") ? ["still listed"] : [];
});

await test("deleteBranch of a missing branch throws 404", () =>
	rejects(() => deleteBranch({ ...hub, accessToken: TOKEN, repo: kernel(pub), branch: "feature/x" }), 404));

await test("deleteBranch of main throws 403", () =>
	rejects(() => deleteBranch({ ...hub, accessToken: TOKEN, repo: kernel(pub), branch: "main" }), 403));

for (const name of [pub, priv, withFiles]) {
	await test(`deleteRepo ${name}`, async () => {
		await deleteRepo({ ...hub, accessToken: TOKEN, repo: kernel(name) });
		return (await repoExists({ ...hub, repo: kernel(name), accessToken: TOKEN })) ? ["still exists"] : [];
	});
}

await test("deleteRepo of a missing repo throws 404", () =>
	rejects(() => deleteRepo({ ...hub, accessToken: TOKEN, repo: kernel(pub) }), 404));

await test("createRepo after deleteRepo starts empty", async () => {
	await createRepo({ ...hub, accessToken: TOKEN, repo: kernel(pub) });
	const n = await countCommits({ ...hub, accessToken: TOKEN, repo: kernel(pub) });
	const r = await refs(pub);
	const problems = [];
	if (n !== 1) problems.push(`count ${n}`);
	if (r.branches.length !== 1) problems.push(`branches ${r.branches.map((b) => b.name)}`);
	await deleteRepo({ ...hub, accessToken: TOKEN, repo: kernel(pub) });
	return problems;
});

done();
