package detect

import "fmt"

// cocoClasses are the 80 COCO object classes in the order the network's
// class heatmap uses.
var cocoClasses = [80]string{
	"person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
	"fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
	"elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
	"skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
	"wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
	"broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant", "bed",
	"dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone", "microwave", "oven",
	"toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush",
}

// NumClasses is the number of object classes the detector knows.
const NumClasses = len(cocoClasses)

// ClassName returns the COCO name of class i, or "class<i>" when i is out of range.
func ClassName(i int) string {
	if i < 0 || i >= len(cocoClasses) {
		return fmt.Sprintf("class%d", i)
	}
	return cocoClasses[i]
}
