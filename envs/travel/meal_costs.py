"""The meal part of the travel solver's cost (see ``solver.py``): for a fixed route, the cheapest
distinct restaurants per city and, with a cuisine rule, an exact DP over cities x covered cuisines
x meals moved to travel days, where each city's cost for (cuisine mask, count) is the minimum
over covering sets (one restaurant per cuisine) plus the cheapest others.
"""

from __future__ import annotations

import itertools

from envs.travel.index import Restaurant, SandboxIndex

INF = float("inf")


class MealCosts:
    """Memo tables of one query's meal costs: ``people`` diners, the query's wanted ``cuisines``."""

    def __init__(self, index: SandboxIndex, people: int, cuisines: tuple[str, ...]):
        self.index = index
        self.p = people
        self.cuisines = cuisines
        self._rest: dict = {}
        self._meal: dict = {}

    def restaurants(self, city: str) -> tuple[list[Restaurant], list[float]]:
        if city not in self._rest:
            rs = sorted(self.index.restaurants.in_city(city), key=lambda r: (r.cost, r.name))
            prefix = [0.0]
            for r in rs:
                prefix.append(prefix[-1] + r.cost * self.p)
            self._rest[city] = (rs, prefix)
        return self._rest[city]

    def city_meals(self, city: str, mask: int, n: int) -> tuple[float, tuple[Restaurant, ...]] | None:
        """Cheapest n distinct restaurants of the city serving every cuisine in ``mask``."""
        key = (city, mask, n)
        if key in self._meal:
            return self._meal[key]
        rs, prefix = self.restaurants(city)
        result = None
        if n <= len(rs):
            if mask == 0:
                result = (prefix[n], tuple(rs[:n]))
            else:
                n_wanted = bin(mask).count("1")
                best_cost, best_set = INF, None
                for cover in self._covers(city, mask):
                    if len(cover) > n:
                        continue
                    base = sum(r.cost for r in cover) * self.p
                    if base + prefix[max(0, n - n_wanted)] >= best_cost:
                        break  # covers come cheapest first: no later one can win
                    chosen = list(cover)
                    need = n - len(cover)
                    for r in rs:
                        if need == 0:
                            break
                        if r not in cover:
                            chosen.append(r)
                            need -= 1
                    c = sum(r.cost for r in chosen) * self.p
                    if c < best_cost - 1e-9:
                        best_cost, best_set = c, tuple(chosen)
                if best_set is not None:
                    result = (best_cost, best_set)
        self._meal[key] = result
        return result

    def _covers(self, city: str, mask: int) -> list[tuple[Restaurant, ...]]:
        key = ("covers", city, mask)
        if key not in self._meal:
            rs, _ = self.restaurants(city)
            lists = []
            for i, c in enumerate(self.cuisines):
                if mask >> i & 1:
                    lists.append([r for r in rs if c in r.cuisines])
            covers = set()
            if all(lists):
                for pick in itertools.product(*lists):
                    covers.add(tuple(sorted(set(pick), key=lambda r: (r.cost, r.name))))
            self._meal[key] = sorted(covers, key=lambda t: (sum(r.cost for r in t), [r.name for r in t]))
        return self._meal[key]

    def mask_coverable(self, city: str) -> int:
        rs, _ = self.restaurants(city)
        m = 0
        for i, c in enumerate(self.cuisines):
            if any(c in r.cuisines for r in rs):
                m |= 1 << i
        return m

    def meal_dp(self, cities, full):
        """Min meal cost over cities: returns (cost, [(restaurants, a_j, b_j) per city]) where a_j /
        b_j meals go to the arrival / departure travel day."""
        ncu = len(self.cuisines)
        full_mask = (1 << ncu) - 1
        max_extra = ncu  # more than one extra meal per wanted cuisine never helps
        # state: (mask, b_prev) -> (cost, choices)
        states: dict[tuple[int, int], tuple[float, list]] = {(0, 0): (0.0, [])}
        for j, city in enumerate(cities):
            req = 3 * full[j]
            nxt: dict[tuple[int, int], tuple[float, list]] = {}
            cov = self.mask_coverable(city) if ncu else 0
            sub_masks = [m for m in range(full_mask + 1) if m & ~cov == 0]
            for (mask, b_prev), (cost, choices) in states.items():
                for a in range(0, min(3 - b_prev, max_extra) + 1):
                    for b in range(0, min(3, max_extra - a) + 1):
                        for m in sub_masks:
                            if m & mask and m != 0 and (m & ~mask) == 0:
                                continue  # covering only already-covered cuisines never helps
                            r = self.city_meals(city, m, req + a + b)
                            if r is None:
                                continue
                            key = (mask | m, b)
                            c = cost + r[0]
                            if key not in nxt or c < nxt[key][0] - 1e-9:
                                nxt[key] = (c, choices + [(r[1], a, b)])
            states = nxt
        best = None
        for (mask, _b), (cost, choices) in states.items():
            if mask == full_mask and (best is None or cost < best[0] - 1e-9):
                best = (cost, choices)
        return best
