package strategy

// Level is a context status level of the three-tier design.
type Level string

// The status levels, from least to most used context.
const (
	LevelGreen    Level = "GREEN"
	LevelYellow   Level = "YELLOW"
	LevelOrange   Level = "ORANGE"
	LevelRed      Level = "RED"
	LevelCritical Level = "CRITICAL"
)

// LevelFor maps a context usage fraction (0.5 is 50%) to its level:
// GREEN below 0.25, YELLOW below 0.50, ORANGE below 0.75, RED below 0.85,
// CRITICAL otherwise. A NaN usage is CRITICAL, so that a broken estimate
// errs towards compressing.
func LevelFor(usage float64) Level {
	switch {
	case usage < 0.25:
		return LevelGreen
	case usage < 0.50:
		return LevelYellow
	case usage < 0.75:
		return LevelOrange
	case usage < 0.85:
		return LevelRed
	default:
		return LevelCritical
	}
}

// Recommendation returns the three-tier design's action for a level, or "" for an
// unknown level.
func Recommendation(l Level) string {
	switch l {
	case LevelGreen:
		return "Continue normally"
	case LevelYellow:
		return "Monitor, prepare compression"
	case LevelOrange:
		return "Apply Tier 1 & 2"
	case LevelRed:
		return "Apply Tier 3 summarisation"
	case LevelCritical:
		return "Checkpoint + fresh session"
	default:
		return ""
	}
}
