//! Pre-cut: a Q-learning controller that decides, after each draft-model call, whether to
//! CONTINUE drafting or STOP and verify ("Holistic Token Efficient in Speculative Decoding:
//! Post-use & Pre-cut", §5.2 and App. D.4.3).
//!
//! What the paper specifies, and is followed here:
//! - §5.2: states are (draft cost so far = number of draft-model calls, expected benefit = the
//!   product of the draft tokens' confidences, §4.2 Eq. 6); actions CONTINUE / STOP; the greedy
//!   decision is `argmax_a Q(s, a)`; after verification the reward is `η − 1` with
//!   `η = useful / cost`, useful counting USEFUL tokens (Eq. 7: draft tokens equal to the
//!   target's greedy token at their position) and cost counting the draft calls plus one target
//!   call.
//! - §3.2 Eq. 5: `Q(s,a) ← Q(s,a) + α [r + γ max_a' Q(s',a') − Q(s,a)]`, ε-greedy exploration
//!   (with `α_n = max(α, 1/n)` for a cell's n-th update, and CONTINUE preferred in a state until
//!   it has been tried there: see [`PreCut::greedy`] and `update_towards` for why).
//! - App. D.4.3: α = 0.1, γ = 0.99, ε = 0.5; `Q_init` has CONTINUE slightly above STOP (so the
//!   draft initially runs to the maximum length λ); every position of a finished draft is
//!   treated as a virtual CONTINUE/STOP trial, so one verification updates the whole chain.
//!
//! Where the paper is silent, the choices made here:
//! - Discretization: the cost axis is the call count itself (1..=`max_calls`, larger counts
//!   share the last bucket); the benefit axis splits [0, 1] into `benefit_bins` equal bins.
//! - Episodes: one draft round. STOP after call `i` is terminal with reward
//!   `η − 1` of the draft cut after call `i`; CONTINUE after call `i`
//!   moves to the state after call `i+1` with reward 0. The virtual trials are applied from
//!   the last call back to the first, and the next state's value is the best the round itself
//!   shows (stop there, or go on as far as the draft went), not the table's partly learned
//!   estimate: see [`PreCut::learn`] for why.
//!   A state reached at the maximum length only allows STOP, so its value is its STOP value.
//! - ε decays multiplicatively after each round (`epsilon_decay`, floor `epsilon_min`);
//!   exploration draws from a seeded generator, so runs are reproducible.
//! - The unit of cost: one target call. §5.2 says the reward is zero at "one useful token per
//!   unit cost"; with the target call as the unit that is exactly autoregressive decoding, so
//!   `η = (useful + 1) / (1 + calls · draft_cost)` is the round's speed relative to AR (Eq. 3)
//!   and `η − 1 > 0` means the round beat AR. Useful counts the target's own (bonus) token too,
//!   as AR's one token per call does. (With the draft call as the unit, η < 1 always, every
//!   reward is negative and γ < 1 then favours drafting on forever.) `draft_cost` = t_draft /
//!   t_target is a parameter, default 0.3; under the `auto` draft policy it is the ratio
//!   measured while decoding (the policy's drafter time per call over its 1-token step,
//!   [`PreCut::set_draft_cost`]; session 31: on Qwen2.5-Coder 0.5B → 1.5B a call costs ~0.45
//!   of a step on a 2-core Zen 4, not 0.3).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::DecodeError;

/// Pre-cut hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PreCutConfig {
    /// α: learning rate.
    pub alpha: f32,
    /// γ: discount factor.
    pub gamma: f32,
    /// ε at the start.
    pub epsilon: f32,
    /// ε is multiplied by this after each verified round.
    pub epsilon_decay: f32,
    /// ε never decays below this.
    pub epsilon_min: f32,
    /// Initial Q(s, CONTINUE) (Q(s, STOP) starts at 0).
    pub continue_bias: f32,
    /// Cost of one draft call in target-call units (t_draft / t_target). Under the `auto` draft
    /// policy it is replaced by the ratio measured while decoding ([`PreCut::set_draft_cost`]).
    pub draft_cost: f32,
    /// Cost buckets: call counts 1..=max_calls (larger counts share the last).
    pub max_calls: usize,
    /// Buckets of the confidence product over [0, 1].
    pub benefit_bins: usize,
    /// Seed of the exploration generator.
    pub seed: u64,
}

impl Default for PreCutConfig {
    fn default() -> Self {
        Self {
            alpha: 0.1,
            gamma: 0.99,
            epsilon: 0.5,
            epsilon_decay: 0.95,
            epsilon_min: 0.01,
            continue_bias: 0.01,
            draft_cost: 0.3,
            max_calls: 32,
            benefit_bins: 10,
            seed: 0,
        }
    }
}

impl PreCutConfig {
    /// Checks the ranges of every parameter.
    pub fn validate(&self) -> Result<(), DecodeError> {
        let bad = |name, value: String, bound| Err(DecodeError::Parameter { method: "pre-cut", name, value, bound });
        let unit = |x: f32| (0.0..=1.0).contains(&x);
        if !unit(self.alpha) || self.alpha == 0.0 {
            return bad("alpha", self.alpha.to_string(), "must be in (0, 1]");
        }
        if !unit(self.gamma) {
            return bad("gamma", self.gamma.to_string(), "must be in [0, 1]");
        }
        if !unit(self.epsilon) || !unit(self.epsilon_decay) || !unit(self.epsilon_min) {
            return bad(
                "epsilon",
                format!("{} (decay {}, min {})", self.epsilon, self.epsilon_decay, self.epsilon_min),
                "epsilon, its decay and floor must be in [0, 1]",
            );
        }
        if self.draft_cost.is_nan() || self.draft_cost <= 0.0 {
            return bad("draft_cost", self.draft_cost.to_string(), "must be positive");
        }
        if self.max_calls == 0 || self.benefit_bins == 0 {
            return bad(
                "max_calls/benefit_bins",
                format!("{}/{}", self.max_calls, self.benefit_bins),
                "must be at least 1",
            );
        }
        Ok(())
    }
}

/// The controller's two actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Continue,
    Stop,
}

/// What the controller knew after one draft-model call of a round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DraftStep {
    /// Draft tokens produced by the calls so far.
    pub tokens: usize,
    /// Product of their confidences.
    pub confidence: f32,
}

/// Q-table over (cost, expected benefit) × {CONTINUE, STOP}.
#[derive(Debug, Clone)]
pub struct PreCut {
    config: PreCutConfig,
    /// `[max_calls + 1][benefit_bins]` rows of `[Q(CONTINUE), Q(STOP)]`.
    q: Vec<[f32; 2]>,
    /// Updates so far of each state's `[CONTINUE, STOP]`.
    visits: Vec<[u32; 2]>,
    epsilon: f32,
    rng: StdRng,
}

impl PreCut {
    pub fn new(config: PreCutConfig) -> Result<Self, DecodeError> {
        config.validate()?;
        let states = (config.max_calls + 1) * config.benefit_bins;
        Ok(Self {
            config,
            q: vec![[config.continue_bias, 0.0]; states],
            visits: vec![[0, 0]; states],
            epsilon: config.epsilon,
            rng: StdRng::seed_from_u64(config.seed),
        })
    }

    pub fn epsilon(&self) -> f32 {
        self.epsilon
    }

    /// The cost of one draft call in target calls, as it prices the rounds from now on.
    pub fn draft_cost(&self) -> f32 {
        self.config.draft_cost
    }

    /// Prices draft calls at `cost` target calls from the next round on: the ratio measured on
    /// the running machine, in place of the configured one (ignored unless positive and finite).
    pub fn set_draft_cost(&mut self, cost: f64) {
        if cost.is_finite() && cost > 0.0 {
            self.config.draft_cost = cost as f32;
        }
    }

    /// State index after `calls` draft calls whose tokens have confidence product `expected`.
    pub fn state(&self, calls: usize, expected: f32) -> usize {
        let bins = self.config.benefit_bins;
        let benefit = ((expected.clamp(0.0, 1.0) * bins as f32) as usize).min(bins - 1);
        calls.min(self.config.max_calls) * bins + benefit
    }

    /// `Q(state, action)`.
    pub fn q(&self, state: usize, action: Action) -> f32 {
        self.q[state][action as usize]
    }

    /// The greedy action (CONTINUE on ties). A state where CONTINUE has never been learned
    /// continues: `Q_init` prefers CONTINUE "so that the draft initially runs to the maximum
    /// length" (App. D.4.3), and that must hold until CONTINUE has been tried there — STOP's
    /// value rises from its first visit, CONTINUE's only once a draft went on past the state, so
    /// comparing the two before that locks rarely visited states into STOP.
    pub fn greedy(&self, state: usize) -> Action {
        if self.visits[state][Action::Continue as usize] == 0
            || self.q(state, Action::Continue) >= self.q(state, Action::Stop)
        {
            Action::Continue
        } else {
            Action::Stop
        }
    }

    /// ε-greedy decision after `calls` draft calls with confidence product `expected`.
    pub fn decide(&mut self, calls: usize, expected: f32) -> Action {
        let state = self.state(calls, expected);
        if self.rng.random::<f32>() < self.epsilon {
            if self.rng.random::<bool>() {
                Action::Continue
            } else {
                Action::Stop
            }
        } else {
            self.greedy(state)
        }
    }

    /// Eq. 5. `next`: the following state and whether CONTINUE is still allowed there; `None`
    /// for a terminal transition.
    pub fn update(&mut self, state: usize, action: Action, reward: f32, next: Option<(usize, bool)>) {
        let future = match next {
            None => 0.0,
            Some((s, true)) => self.q(s, Action::Continue).max(self.q(s, Action::Stop)),
            Some((s, false)) => self.q(s, Action::Stop),
        };
        self.update_towards(state, action, reward + self.config.gamma * future);
    }

    /// Learns from one verified round: `steps[j]` is the situation after call `j + 1`,
    /// `useful[t]` whether draft token `t` was USEFUL, `max_tokens` the draft length limit.
    ///
    /// Every position is a virtual trial (App. D.4.3). STOP after call `j` earns the round's
    /// reward cut there, `r_j`. CONTINUE after call `j` earns nothing now and reaches the next
    /// state, whose value is taken from what the round shows: `V_j = max(r_j, γ·V_{j+1})`, and
    /// at the last call `V = max(r, Q(s, CONTINUE))` while drafting could have gone on (`r` at
    /// the length limit). Bootstrapping from the table's own `Q(s', STOP)` instead — which
    /// approaches `r` by a factor α per visit — leaves CONTINUE behind the immediately rewarded
    /// STOP, and the controller locks into stopping after the first call (measured on Qwen2.5-
    /// Coder 0.5B → 1.5B: MAT 1.35 at every λ although 65–84 % of drafts were accepted).
    pub fn learn(&mut self, steps: &[DraftStep], useful: &[bool], max_tokens: usize) {
        let states: Vec<usize> = steps.iter().enumerate().map(|(j, s)| self.state(j + 1, s.confidence)).collect();
        let rewards: Vec<f32> = (0..steps.len())
            .map(|j| {
                let tokens = steps[j].tokens.min(useful.len());
                let gained = useful[..tokens].iter().filter(|&&u| u).count() as f32;
                (gained + 1.0) / (1.0 + (j + 1) as f32 * self.config.draft_cost) - 1.0
            })
            .collect();
        let Some(last) = steps.len().checked_sub(1) else { return };
        let open = steps[last].tokens < max_tokens;
        let mut value = if open { rewards[last].max(self.q(states[last], Action::Continue)) } else { rewards[last] };
        for j in (0..steps.len()).rev() {
            self.update(states[j], Action::Stop, rewards[j], None);
            if j < last {
                self.update_towards(states[j], Action::Continue, self.config.gamma * value);
                value = rewards[j].max(self.config.gamma * value);
            }
        }
        self.epsilon = (self.epsilon * self.config.epsilon_decay).max(self.config.epsilon_min);
    }

    /// `Q(s,a) ← Q(s,a) + α_n (target − Q(s,a))` with `α_n = max(α, 1/n)` at the n-th update:
    /// the first updates average their samples instead of creeping from `Q_init` — with α = 0.1
    /// a state whose CONTINUE was tried once would otherwise sit far below a STOP updated a
    /// hundred times, and never be tried again.
    fn update_towards(&mut self, state: usize, action: Action, target: f32) {
        let n = &mut self.visits[state][action as usize];
        *n += 1;
        let rate = self.config.alpha.max(1.0 / *n as f32);
        let cell = &mut self.q[state][action as usize];
        *cell += rate * (target - *cell);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> PreCutConfig {
        PreCutConfig { draft_cost: 0.5, epsilon: 0.0, ..PreCutConfig::default() }
    }

    #[test]
    fn one_round_updates_by_hand() {
        let mut pc = PreCut::new(config()).unwrap();
        // Call 1 drafts a token with confidence 0.95 (USEFUL), call 2 one with 0.5 (not USEFUL).
        let steps = [DraftStep { tokens: 1, confidence: 0.95 }, DraftStep { tokens: 2, confidence: 0.475 }];
        pc.learn(&steps, &[true, false], 8);
        let (s1, s2) = (pc.state(1, 0.95), pc.state(2, 0.475));
        assert_eq!((s1, s2), (19, 24), "cost 1 / bin 9 and cost 2 / bin 4 with 10 bins");
        // First updates take the whole target (α_1 = 1).
        // STOP after call 2: η = (1 + 1) / (1 + 2·0.5) = 1, r = 0.
        assert_eq!(pc.q(s2, Action::Stop), 0.0);
        // STOP after call 1: η = (1 + 1) / (1 + 0.5) = 4/3, r = 1/3.
        assert!((pc.q(s1, Action::Stop) - 1.0 / 3.0).abs() < 1e-6);
        // CONTINUE after call 1: γ·V(s2), V(s2) = max(r₂ = 0, Q(s2, CONTINUE) = 0.01) → 0.0099.
        assert!((pc.q(s1, Action::Continue) - 0.0099).abs() < 1e-7);
        assert_eq!(pc.greedy(s1), Action::Stop, "stopping after the useful token paid more");
        // The same round with both tokens USEFUL: α_2 = 1/2 averages the two samples.
        // r₂ = (2 + 1) / 2 − 1 = 0.5 → Q(s2, STOP) = (0 + 0.5) / 2; Q(s1, CONTINUE) =
        // (0.0099 + 0.99·0.5) / 2.
        pc.learn(&steps, &[true, true], 8);
        assert!((pc.q(s2, Action::Stop) - 0.25).abs() < 1e-6);
        assert!((pc.q(s1, Action::Continue) - (0.0099 + 0.495) / 2.0).abs() < 1e-6);
        assert_eq!(pc.q(s2, Action::Continue), 0.01, "no observed continuation after the last call");
    }

    #[test]
    fn a_well_accepted_drafter_learns_to_continue_and_a_useless_one_to_stop() {
        // Draft cost 0.3, λ = 6, no exploration; confidences 0.9 per token.
        let cfg = PreCutConfig { draft_cost: 0.3, epsilon: 0.0, ..PreCutConfig::default() };
        let chain =
            |n: usize| (1..=n).map(|t| DraftStep { tokens: t, confidence: 0.9f32.powi(t as i32) }).collect::<Vec<_>>();
        let mut good = PreCut::new(cfg).unwrap();
        for _ in 0..20 {
            // Draft as the greedy policy would, then learn: every token is USEFUL.
            let mut n = 1;
            while n < 6 && good.decide(n, 0.9f32.powi(n as i32)) == Action::Continue {
                n += 1;
            }
            good.learn(&chain(n), &vec![true; n], 6);
        }
        assert!(
            (1..6).all(|c| good.greedy(good.state(c, 0.9f32.powi(c as i32))) == Action::Continue),
            "keeps drafting while drafts pay"
        );
        let mut bad = PreCut::new(cfg).unwrap();
        for _ in 0..20 {
            let mut n = 1;
            while n < 6 && bad.decide(n, 0.9f32.powi(n as i32)) == Action::Continue {
                n += 1;
            }
            bad.learn(&chain(n), &vec![false; n], 6);
        }
        assert_eq!(bad.greedy(bad.state(1, 0.9)), Action::Stop, "stops after one call when nothing is accepted");
    }

    #[test]
    fn with_every_draft_useful_drafts_grow_to_the_limit_whatever_the_confidences() {
        // Confidences vary (0.3–1 per token), so the rounds spread over many (cost, benefit)
        // states, most of them rarely seen: none may lock into STOP.
        let mut pc = PreCut::new(PreCutConfig::default()).unwrap();
        let mut seed = 1u64;
        let mut uniform = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 40) as f32 / (1u64 << 24) as f32
        };
        let mut lengths = Vec::new();
        for _ in 0..2000 {
            let (mut steps, mut product) = (Vec::new(), 1.0f32);
            loop {
                product *= 0.3 + 0.7 * uniform();
                steps.push(DraftStep { tokens: steps.len() + 1, confidence: product });
                if steps.len() >= 6 || pc.decide(steps.len(), product) == Action::Stop {
                    break;
                }
            }
            let n = steps.len();
            pc.learn(&steps, &vec![true; n], 6);
            lengths.push(n);
        }
        let late = lengths[1500..].iter().sum::<usize>() as f32 / 500.0;
        assert!(late > 5.5, "mean draft length over the last 500 rounds: {late}");
    }

    #[test]
    fn at_the_length_limit_only_stop_counts() {
        let mut pc = PreCut::new(config()).unwrap();
        let steps = [DraftStep { tokens: 1, confidence: 0.05 }, DraftStep { tokens: 2, confidence: 0.01 }];
        pc.learn(&steps, &[false, false], 2);
        let (s1, s2) = (pc.state(1, 0.05), pc.state(2, 0.01));
        // r₂ = 1/2 − 1 = −0.5 = Q(s2, STOP). At the limit s2's value is r₂ (not the 0.01 of
        // CONTINUE): Q(s1, CONTINUE) = 0.99·(−0.5). Q(s1, STOP) = 1/1.5 − 1.
        assert!((pc.q(s2, Action::Stop) - -0.5).abs() < 1e-6);
        assert!((pc.q(s1, Action::Continue) - -0.495).abs() < 1e-6);
        assert!((pc.q(s1, Action::Stop) - -1.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn exploration_is_seeded_and_decays() {
        let decisions = |seed| {
            let mut pc = PreCut::new(PreCutConfig { seed, ..PreCutConfig::default() }).unwrap();
            (0..32).map(|i| pc.decide(1 + i % 4, 0.5)).collect::<Vec<_>>()
        };
        assert_eq!(decisions(7), decisions(7));
        assert!(decisions(7).contains(&Action::Stop), "ε = 0.5 explores STOP");
        let mut pc = PreCut::new(PreCutConfig::default()).unwrap();
        pc.learn(&[DraftStep { tokens: 1, confidence: 0.9 }], &[true], 8);
        assert!((pc.epsilon() - 0.475).abs() < 1e-6);
        assert!(PreCut::new(PreCutConfig { alpha: 0.0, ..PreCutConfig::default() }).is_err());
    }

    #[test]
    fn a_measured_draft_cost_replaces_the_configured_one() {
        let mut pc = PreCut::new(PreCutConfig::default()).unwrap();
        pc.set_draft_cost(0.45);
        assert!((pc.draft_cost() - 0.45).abs() < 1e-6);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            pc.set_draft_cost(bad);
            assert!((pc.draft_cost() - 0.45).abs() < 1e-6, "{bad} ignored");
        }
    }
}
