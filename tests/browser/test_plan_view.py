"""test_plan_view.py STEPSCOPE WORKDIR — the viewer's Plan view in headless Chromium.

A real `stepscope plan --json` document (gpt2-124m on 8 H100s) is opened in the Plan tab of
a self-contained viewer page (`stepscope view RUN --html`), through the tab's file input as
a user would. Checks: the headline names the job and the best layout, the framework
(with --tp-comm-overlap), the cluster given (--nics-per-node, --nic-gbps) and the GEMM
ceiling (the table's; a measured one, --ceilings-from, named with its run), the model (a
Qwen3-30B-A3B plan's heads of 128 and experts too, with its caveats: balanced routing, the EP
ranking and fine-grained experts' compute unvalidated; GPT-OSS's sliding window and a DeepEP
exchange, and Megatron-Core's host floor (card, caveat, host column); a 64K-position plan's
long-context caveat under --attention-rate share, and at cuDNN's measured attention rate
(--attention-rate cudnn, and the default split) its attention card and caveat instead;
Megatron-Core's recompute modules); the table holds the planner's ranking (row 1 = the JSON's
first layout); the ranking card and section say how far that order goes as the JSON's `ranking` does (the group's size, what it decides, leaves open
and rules out) and mark exactly the group's rows "≈ best"; clicking "tokens/s" sorts largest first
and clicking again smallest first; the memory chart stacks five components for 40 layouts
with the device's memory as its scale; a file that is not a plan is refused with a message;
no console errors. Exits 77 (SKIP) without Chromium/Selenium.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def load_plan(d, path, until):
    """Opens a plan through the Plan tab's file input and waits (15 s at most) until the headline
    says `until`."""
    d.find_element("id", "pick-plan").send_keys(path)
    for _ in range(300):
        if until in d.find_element("id", "plan-headline").text:
            return
        harness.time.sleep(0.05)


def main():
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    plan = os.path.join(work, "plan.json")
    subprocess.run([exe, "plan", "--model", "gpt2-124m", "--gpus", "8", "--global-batch", "32",
                    "--nics-per-node", "4", "--nic-gbps", "200", "--tp-comm-overlap",
                    "--precision", "fp8", "--json", plan], check=True, stdout=subprocess.DEVNULL)
    doc = json.load(open(plan))
    run = harness.make_sample(os.path.join(work, "run_plan"), "--dp", "2", "--steps", "2")
    page = os.path.join(work, "viewer-plan.html")
    subprocess.run([exe, "view", run, "--html", page], check=True, stdout=subprocess.DEVNULL)
    d = harness.browser()
    try:
        d.get("file://" + os.path.abspath(page))
        harness.wait_state(d)
        d.find_element("css selector", ".tab[data-tab=plan]").click()
        d.find_element("id", "pick-plan").send_keys(os.path.abspath(plan))
        rows = []
        for _ in range(300):
            rows = d.find_elements("css selector", "#plan-table tbody tr")
            if rows:
                break
            harness.time.sleep(0.05)
        n = len(doc["layouts"])
        check(len(rows) == min(200, n), "table rows: %d of %d layouts" % (len(rows), n))
        head = d.find_element("id", "plan-headline").text
        check("8 × h100-sxm" in head and doc["layouts"][0]["layout"]["name"] in head,
              "headline names the job and the best layout")
        check("12 layers × 768 (12 heads), seq 1024" in head, "the model card: a dense GPT-2")
        check("megatron, TP overlap, fp8 GEMMs" in head and "nodes of 8, 450 GB/s a device inside, 4 NICs × 200 Gb/s" in head,
              "the framework and cluster cards say what the prediction assumed")
        check("compute 18.9 % slower beside overlapped data-parallel collectives" in head,
              "the framework card says what an overlapped collective costs (job.overlap_slowdown)")
        check("62 % of peak (the device table's)" in head, "the GEMM ceiling card: the table's")
        check("30 % of peak (the device table's, at 2048 positions, scaled by the kernel's rate at "
              "the length it runs on)" in head, "the attention card: the table's, and its length")
        k = doc["ranking"]
        check(k["undecided"] > 1, "this job has an undecided group (%d layouts)" % k["undecided"])
        check(("undecided among #1–#%d (within 10 %%" % k["undecided"]) in head,
              "the ranking card names the undecided group")
        marked = [i for i, r in enumerate(rows) if r.find_elements("css selector", "td")[-1].text == "≈ best"]
        check(marked == list(range(min(k["undecided"], len(rows)))), "exactly the group's rows are marked")
        section = d.find_element("id", "plan-ranking").text
        open_pp = ", ".join(str(v) for v in k["choices"]["pp"]["open"])
        ruled_rc = ", ".join(k["choices"]["recompute"]["ruled_out"])
        check(("pp " + open_pp) in section and (not ruled_rc or ("recompute " + ruled_rc) in section),
              "the ranking section lists the JSON's choices (pp open %s, recompute ruled out %s)" % (open_pp, ruled_rc))
        first = rows[0].find_elements("css selector", "td")
        check(first[1].text == doc["layouts"][0]["layout"]["name"], "row 1 is the planner's best")

        def column(k):
            return [float(r.find_elements("css selector", "td")[k].text)
                    for r in d.find_elements("css selector", "#plan-table tbody tr")]
        th = [t for t in d.find_elements("css selector", "#plan-table th") if t.text.startswith("tokens/s")][0]
        k = int(th.get_attribute("data-col"))
        th.click()
        v = column(k)
        check(all(v[i] >= v[i + 1] for i in range(len(v) - 1)), "tokens/s sorted largest first")
        th = [t for t in d.find_elements("css selector", "#plan-table th") if t.text.startswith("tokens/s")][0]
        th.click()
        v = column(k)
        check(all(v[i] <= v[i + 1] for i in range(len(v) - 1)), "clicked again: smallest first")
        rects = d.find_elements("css selector", "#plan-memory rect[data-series]")
        series = {r.get_attribute("data-series") for r in rects}
        check(len(rects) == 5 * min(40, n) and series == {"parameters", "gradients", "optimizer",
              "activations", "runtime baseline"}, "memory chart: 5 stacked components x 40 layouts")
        # a plan whose GEMM ceiling was measured (`plan --ceilings-from`): the card says where
        measured = dict(doc, gemm_ceiling_measured={
            "source": "run.pt.trace.json", "device": "NVIDIA H100 80GB HBM3", "dtype": "bf16",
            "peak_flops": 989.4e12, "gemms": 168, "flops": 5.5e12, "time_s": 0.009, "share": 0.6195,
            "filled_gemms": 48, "ceiling": 0.6359},
            attention_ceiling_measured={
                "forward_ops": 48, "backward_ops": 24, "left_out_ops": 0, "forward_flops": 1e12,
                "forward_time_s": 0.002, "backward_flops": 1e12, "backward_time_s": 0.003,
                "forward_share": 0.5053, "backward_share": 0.3369, "ceiling": 0.3790, "why": None})
        with open(os.path.join(work, "measured.json"), "w") as f:
            json.dump(measured, f)
        load_plan(d, os.path.abspath(os.path.join(work, "measured.json")), "measured in")
        check("63.6 % of peak, measured in run.pt.trace.json (48 of 168 bf16 GEMMs on NVIDIA H100 80GB HBM3)"
              in d.find_element("id", "plan-headline").text, "the GEMM ceiling card names the measurement")
        check("37.9 % of peak, measured (48 forward at 50.5 %, 24 backward at 33.7 %)"
              in d.find_element("id", "plan-headline").text, "the attention card names the measurement")
        # a model with heads wider than hidden / heads and experts (Qwen3-30B-A3B)
        qwen = os.path.join(work, "qwen.json")
        subprocess.run([exe, "plan", "--model", "qwen3-30b-a3b", "--framework", "fsdp", "--gpus", "8",
                        "--global-batch", "512", "--dp", "8", "--tp", "1", "--pp", "1", "--cp", "1",
                        "--ep", "8", "--zero", "3", "--recompute", "full", "--microbatches", "16",
                        "--json", qwen], check=True, stdout=subprocess.DEVNULL)
        want = "48 layers × 2048 (32 heads of 128), seq 4096, 128 experts, top 8 of 768 wide"
        load_plan(d, os.path.abspath(qwen), want)
        check(want + ", no dropout" in d.find_element("id", "plan-headline").text,
              "the model card: Qwen3's heads and experts, trained without dropout")
        caveats = d.find_element("id", "plan-caveats").text
        check("Routing is taken as balanced" in caveats and "take the EP ranking as a hypothesis" in caveats
              and "Fine-grained experts (64 or more)" in caveats, "a MoE plan's caveats shown")
        # GPT-OSS: its sliding window in the model card, DeepEP in the framework card
        oss = os.path.join(work, "oss.json")
        subprocess.run([exe, "plan", "--model", "gpt-oss-120b", "--gpus", "64", "--global-batch", "64",
                        "--ep-dispatcher", "deepep", "--dp", "16", "--tp", "1", "--pp", "4", "--cp", "1",
                        "--ep", "8", "--zero", "1", "--recompute", "none", "--schedule", "1f1b",
                        "--microbatches", "4", "--json", oss], check=True, stdout=subprocess.DEVNULL)
        want = "sliding window 128 (every 2nd layer whole)"
        load_plan(d, os.path.abspath(oss), want)
        head = d.find_element("id", "plan-headline").text
        check(want in head and "DeepEP token exchange" in head, "GPT-OSS's window and DeepEP named")
        # a Megatron plan: the host floor in the framework card, its caveat, a host column
        check("a layer at least 4.1 ms (8.2 with experts) a micro-batch" in head and
              "Megatron-Core takes at least" in d.find_element("id", "plan-caveats").text and
              any(t.text.startswith("host s") for t in d.find_elements("css selector", "#plan-table th")),
              "Megatron's host floor named, its caveat and the host column shown")
        check("Long sequences" not in d.find_element("id", "plan-caveats").text,
              "no long-context caveat at 4096 positions")
        # the same with NCCL's all-to-all (the default dispatcher): its own floor named too
        oss_a2a = os.path.join(work, "oss_a2a.json")
        subprocess.run([exe, "plan", "--model", "gpt-oss-120b", "--gpus", "64", "--global-batch", "64",
                        "--dp", "16", "--tp", "1", "--pp", "4", "--cp", "1", "--ep", "8", "--zero", "1",
                        "--recompute", "none", "--schedule", "1f1b", "--microbatches", "4",
                        "--json", oss_a2a], check=True, stdout=subprocess.DEVNULL)
        load_plan(d, os.path.abspath(oss_a2a), "exchanging tokens by all-to-all")
        check("a layer at least 4.1 ms (8.2 with experts, 12.0 exchanging tokens by all-to-all) a micro-batch"
              in d.find_element("id", "plan-headline").text, "the all-to-all dispatcher's floor named")
        check("selective recomputes" not in head, "no recompute modules named, none shown")
        # Megatron's allgather dispatcher: named, and the MoE floor without the all-to-all's
        oss_ag = os.path.join(work, "oss_ag.json")
        subprocess.run([exe, "plan", "--model", "gpt-oss-120b", "--gpus", "64", "--global-batch", "64",
                        "--ep-dispatcher", "allgather", "--dp", "16", "--tp", "1", "--pp", "4",
                        "--cp", "1", "--ep", "8", "--zero", "1", "--recompute", "none", "--schedule",
                        "1f1b", "--microbatches", "4", "--json", oss_ag], check=True,
                       stdout=subprocess.DEVNULL)
        load_plan(d, os.path.abspath(oss_ag), "allgather token exchange")
        head_ag = d.find_element("id", "plan-headline").text
        check("a layer at least 4.1 ms (8.2 with experts) a micro-batch" in head_ag
              and "all-to-all" not in head_ag, "the allgather dispatcher named, with the MoE floor")
        # a long sequence (64K) with the attention share (--attention-rate share): its caveat
        long64k = [exe, "plan", "--model", "llama3-8b", "--seq", "65536", "--max-seq", "65536",
                   "--gpus", "64", "--global-batch", "64", "--dp", "8", "--tp", "8", "--pp", "1",
                   "--cp", "1", "--zero", "1", "--recompute", "full", "--microbatches", "8"]
        long_ctx = os.path.join(work, "long.json")
        subprocess.run(long64k + ["--attention-rate", "share", "--json", long_ctx], check=True,
                       stdout=subprocess.DEVNULL)
        load_plan(d, os.path.abspath(long_ctx), "seq 65536")
        head = d.find_element("id", "plan-headline").text
        check("seq 65536" in head, "the 64K plan loaded")
        check("Long sequences (32K positions or more)" in d.find_element("id", "plan-caveats").text,
              "a 64K plan's caveat on the attention share shown")
        # the same plan at cuDNN's measured rate, alone (--attention-rate cudnn) and split (the
        # default): the attention card says so, its caveat replaces the share's
        for rate, card, caveat in (
                ("cudnn", "heads of 128)", "Attention at cuDNN's measured rate alone"),
                ("split", "heads of 128) plus, per token, the time beyond it that 30 % of peak "
                 "charges at 2048 positions", "Attention at cuDNN's measured rate plus, per token")):
            plan = os.path.join(work, rate + ".json")
            subprocess.run(long64k + (["--attention-rate", "cudnn"] if rate == "cudnn" else []) +
                           ["--json", plan], check=True, stdout=subprocess.DEVNULL)
            load_plan(d, os.path.abspath(plan), "plus, per token" if rate == "split" else "cuDNN")
            head = d.find_element("id", "plan-headline").text
            caveats = d.find_element("id", "plan-caveats").text
            check("cuDNN's measured rate by length (TransformerEngine's fused attention on Hopper, "
                  + card in head and caveat in caveats and "Long sequences" not in caveats and
                  (rate == "split") == ("plus, per token" in head),
                  "a plan's attention card and caveat at cuDNN's rate: " + rate)
        # Megatron-Core's recompute modules in the framework card
        rcm = os.path.join(work, "rcm.json")
        subprocess.run([exe, "plan", "--model", "qwen3-30b-a3b", "--gpus", "8", "--global-batch", "64",
                        "--dp", "8", "--tp", "1", "--pp", "1", "--cp", "1", "--ep", "8", "--zero", "1",
                        "--recompute", "selective", "--recompute-modules", "layernorm,moe",
                        "--microbatches", "8", "--json", rcm], check=True, stdout=subprocess.DEVNULL)
        load_plan(d, os.path.abspath(rcm), "selective recomputes")
        check("selective recomputes layernorm, moe" in d.find_element("id", "plan-headline").text,
              "the recompute modules in the framework card")
        bad = os.path.join(work, "not-a-plan.json")
        with open(bad, "w") as f:
            f.write('{"traceEvents": []}')
        d.find_element("id", "pick-plan").send_keys(os.path.abspath(bad))
        for _ in range(300):
            if d.find_element("id", "plan-error").text:
                break
            harness.time.sleep(0.05)
        check("not a stepscope plan" in d.find_element("id", "plan-error").text, "a non-plan file is refused")
        errs = harness.console_errors(d)
        check(not errs, "no console errors %s" % errs)
    except Exception:
        d.save_screenshot(os.path.join(work, "viewer-plan-failure.png"))
        raise
    finally:
        d.quit()


if __name__ == "__main__":
    main()
