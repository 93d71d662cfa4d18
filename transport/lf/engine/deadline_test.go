package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDeadlineCtx(t *testing.T) {
	t.Run("expires without Done", func(t *testing.T) {
		d := newDeadlineCtx(context.Background(), 20*time.Millisecond)
		defer d.release()
		if d.Err() != nil {
			t.Fatal("ended early")
		}
		deadline := time.Now().Add(5 * time.Second)
		for d.Err() == nil && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // polling Err is what is under test
		}
		if !errors.Is(d.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want DeadlineExceeded", d.Err())
		}
		select {
		case <-d.Done():
		default:
			t.Fatal("Done not closed after the deadline passed")
		}
	})
	t.Run("Done closes at the deadline", func(t *testing.T) {
		d := newDeadlineCtx(context.Background(), 20*time.Millisecond)
		defer d.release()
		select {
		case <-d.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done did not close")
		}
		if !errors.Is(d.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v", d.Err())
		}
	})
	t.Run("parent cancel", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		d := newDeadlineCtx(parent, time.Hour)
		defer d.release()
		child, ccancel := context.WithTimeout(d, time.Hour) // follows d through AfterFunc
		defer ccancel()
		cancel()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a context derived from the call's did not end with the base")
		}
		if !errors.Is(d.Err(), context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", d.Err())
		}
	})
	t.Run("release", func(t *testing.T) {
		d := newDeadlineCtx(context.Background(), time.Hour)
		done := d.Done()
		ran := make(chan struct{})
		stop := d.AfterFunc(func() { close(ran) })
		stopped := d.AfterFunc(func() { t.Error("stopped AfterFunc ran") })
		if !stopped() {
			t.Fatal("stop of a pending AfterFunc returned false")
		}
		d.release()
		<-done
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("AfterFunc did not run")
		}
		if stop() {
			t.Fatal("stop after the run returned true")
		}
		if dl, ok := d.Deadline(); !ok || time.Until(dl) < 50*time.Minute {
			t.Fatalf("Deadline = %v, %v", dl, ok)
		}
	})
}
